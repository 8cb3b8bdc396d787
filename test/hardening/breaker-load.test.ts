// No fault at all: random-key load at saturation on a healthy Redis must not open the breaker, and
// a failMode closed rule must never admit beyond its limit in a window (single region: budget 0). The engine
// runs with the DEFAULT redis/breaker settings (only the URL is set): the defaults are what must hold.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { captureLog, type CapturedLog } from '../service/fixtures.ts';

const PERIOD_MS = 1_000;
const LIMIT = 10;
const RUN_MS = 4_000;
const CONCURRENCY = 400;

describe('random-key load on a healthy Redis', async () => {
  const redis = await useRedis();
  let service: RegionService;
  let log: CapturedLog;

  beforeAll(async () => {
    log = captureLog();
    service = await startRegionService(
      parseConfig({
        region: 'load',
        port: 0,
        redis: { url: redis.url },
        rules: [
          { name: 'per-key', match: { endpoints: ['/items'] }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000_000, period: '1m' },
          {
            name: 'probe',
            match: { endpoints: ['/probe'] },
            by: ['apiKey'],
            algorithm: 'fixedWindow',
            limit: LIMIT,
            period: PERIOD_MS,
            failMode: 'closed',
          },
        ],
      }),
      { logger: log.logger, federation: false },
    );
  });
  afterAll(async () => {
    await service?.close();
  });

  it('keeps the breaker closed and the fail-closed rule within its limit in every window', async () => {
    const { engine } = service;
    const until = Date.now() + RUN_MS;
    let decisions = 0;
    let counter = 0;
    const worker = async () => {
      while (Date.now() < until) {
        await engine.decide({ apiKey: `random-${counter++}`, ip: '10.0.0.1', method: 'GET', path: '/items' });
        decisions++;
      }
    };
    // One caller on the fail-closed rule, well above its limit, sampled with the window it fell in.
    const admittedByWindow = new Map<number, number>();
    const hot = async () => {
      while (Date.now() < until) {
        const at = Date.now();
        const decision = await engine.decide({ apiKey: 'hot', ip: '10.0.0.1', method: 'GET', path: '/probe' });
        if (decision.allowed) {
          // Attribute to the window Redis counted it in (its reset time names the window's end).
          const window = decision.binding ? Math.floor((decision.binding.resetAtMs - 1) / PERIOD_MS) : Math.floor(at / PERIOD_MS);
          admittedByWindow.set(window, (admittedByWindow.get(window) ?? 0) + 1);
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    await Promise.all([...Array.from({ length: CONCURRENCY }, worker), hot()]);

    const opened = log.lines().filter((line) => line.event === 'breaker.open').length;
    console.info(
      JSON.stringify({
        probe: 'random-key-load',
        decisions,
        breakerOpened: opened,
        worstWindow: Math.max(...admittedByWindow.values()),
        limit: LIMIT,
      }),
    );
    expect(decisions).toBeGreaterThan(1_000); // it was load
    expect(admittedByWindow.size).toBeGreaterThan(1);
    expect(Math.max(...admittedByWindow.values()), JSON.stringify([...admittedByWindow])).toBeLessThanOrEqual(LIMIT);
    expect(log.lines().filter((line) => line.event === 'breaker.open')).toEqual([]);
    expect(engine.breaker.state).toBe('closed');
  });
});

// The region's Redis stopped (SIGSTOP): while the region's own Redis is frozen and the breaker flaps
// open and closed, a failMode closed rule is only ever admitted by Redis (never more than its limit in the
// window), and a failMode open rule's local fallback hands out one share per window, not one per breaker trip,
// and what it admitted is written to Redis once Redis answers again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, captureLog, eventually, metricValue, type CapturedLog } from '../service/fixtures.ts';

const LIMIT = 10;

describe('region Redis frozen (SIGSTOP/SIGCONT), breaker flapping', async () => {
  const redis = await useRedis();
  let service: RegionService;
  let log: CapturedLog;
  const freeze = () => process.kill(redis.pid!, 'SIGSTOP');
  const thaw = () => process.kill(redis.pid!, 'SIGCONT');

  beforeAll(async () => {
    log = captureLog();
    service = await startRegionService(
      parseConfig({
        region: 'stall',
        port: 0,
        logLevel: 'info',
        redis: { url: redis.url, commandTimeoutMs: 200, connectTimeoutMs: 500 },
        breaker: { failureThreshold: 3, probeIntervalMs: 100, successThreshold: 1, localFallback: true },
        rules: [
          {
            name: 'closed',
            match: { endpoints: ['/closed'] },
            by: ['apiKey'],
            algorithm: 'fixedWindow',
            limit: LIMIT,
            period: '30s',
            failMode: 'closed',
          },
          {
            name: 'open',
            match: { endpoints: ['/open'] },
            by: ['apiKey'],
            algorithm: 'fixedWindow',
            limit: LIMIT,
            period: '30s',
            failMode: 'open',
          },
        ],
      }),
      { logger: log.logger, federation: false },
    );
  });
  afterAll(async () => {
    try {
      thaw();
    } catch {
      // already gone
    }
    await service?.close();
  });

  const ask = async (path: string) => (await service.engine.decide({ apiKey: 'hot', ip: '10.0.0.1', method: 'GET', path })).allowed;
  const burst = async (path: string, count: number) => {
    let admitted = 0;
    for (let i = 0; i < count; i++) if (await ask(path)) admitted++;
    return admitted;
  };
  const settled = async () => metricValue(await (await fetch(`${service.url}/metrics`)).text(), 'quotafed_fallback_settled_total');

  it('never admits a fail-closed rule beyond its limit, and the fallback share survives flaps', async () => {
    await awayFromWindowEdge(30_000, 10_000);
    let closed = await burst('/closed', 4);
    let open = await burst('/open', 4);
    expect([closed, open]).toEqual([4, 4]);

    for (let cycle = 0; cycle < 2; cycle++) {
      freeze();
      try {
        await eventually(
          async () => {
            await ask('/open');
            return service.engine.breaker.state === 'open';
          },
          10_000,
          'the breaker to open',
        );
        closed += await burst('/closed', 15);
        open += await burst('/open', 15);
      } finally {
        thaw();
      }
      await eventually(async () => service.engine.breaker.state === 'closed', 10_000, 'the breaker to close');
    }
    // Written back on close (asserted below through Redis's own verdict).
    for (let i = 0; i < 50 && (await settled()) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    closed += await burst('/closed', 15);
    open += await burst('/open', 15);

    // Fail-closed: only Redis admits, so the window holds at most the limit (budget 0 alone).
    console.info(JSON.stringify({ probe: 'redis-stall', closed, open, limit: LIMIT }));
    expect(closed).toBeLessThanOrEqual(LIMIT);
    // Fail-open with local fallback: the limit, plus at most one local share (the whole limit: 1 instance)
    // per window across both outages; the share is not handed out again on the second trip.
    expect(open).toBeLessThanOrEqual(2 * LIMIT);
    // The local admissions reached Redis against this window: after both outages Redis has the open rule's
    // window full, so a further request is denied by Redis.
    const after = await service.engine.decide({ apiKey: 'hot', ip: '10.0.0.1', method: 'GET', path: '/open' });
    expect(after.allowed).toBe(false);
    expect(after.outcomes[0]!.source).not.toBe('local-fallback');
    expect(log.lines().filter((line) => line.event === 'breaker.open').length).toBeGreaterThanOrEqual(2);
  });
});

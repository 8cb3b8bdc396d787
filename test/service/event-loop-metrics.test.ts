// `metrics.eventLoopResolutionMs`: the event-loop lag metrics sample with a timer on the event loop, so an idle
// service wakes that often. Two real `quotafed serve` processes, idle on one Redis: the default (100 ms) and
// prom-client's own 10 ms, their main threads' wake-ups counted from /proc and their lag metrics read from /metrics.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { EVENT_LOOP_RESOLUTION_MS } from '../../src/config/observability.ts';
import type { ServiceProcess } from '../../src/ops/service-process.ts';
import { processIo } from '../../bench/lib/processes.ts';
import { useRedis } from '../harness/redis.ts';
import { serveConfig } from '../support/served-config.ts';

const RULES = [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 10, period: '1m' }];

/** Wake-ups of a process's main thread so far (voluntary context switches: each a return from an idle wait). */
const wakeups = (pid: number | undefined): number => processIo(pid)?.wakeups ?? Number.NaN;

describe('the event-loop lag sampling interval (metrics.eventLoopResolutionMs)', async () => {
  const redis = await useRedis();
  const dir = mkdtempSync(join(tmpdir(), 'quotafed-eventloop-'));
  const processes: ServiceProcess[] = [];
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop(2_000)));
    rmSync(dir, { recursive: true, force: true });
  });

  it('defaults to 100 ms and names the field of a value out of range', () => {
    const base = { region: 'us-east', redis: { url: redis.url }, rules: RULES };
    expect(parseConfig(base, 'test').metrics.eventLoopResolutionMs).toBe(EVENT_LOOP_RESOLUTION_MS);
    expect(EVENT_LOOP_RESOLUTION_MS).toBe(100);
    expect(() => parseConfig({ ...base, metrics: { eventLoopResolutionMs: 0 } }, 'test')).toThrow(/metrics\.eventLoopResolutionMs/);
    expect(() => parseConfig({ ...base, metrics: { eventLoopMs: 10 } }, 'test')).toThrow(/metrics/);
  });

  it("wakes an idle service about ten times a second by default, a hundred at prom-client's 10 ms", async () => {
    const start = async (name: string, metrics?: { eventLoopResolutionMs: number }) => {
      const service = await serveConfig(dir, name, {
        region: name,
        logLevel: 'warn',
        redis: { url: redis.url },
        rules: RULES,
        ...(metrics ? { metrics } : {}),
      });
      processes.push(service);
      return service;
    };
    const [byDefault, fine] = await Promise.all([start('default-lag'), start('fine-lag', { eventLoopResolutionMs: 10 })]);
    // Let start-up settle, then count 2 s of idling side by side.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const before = [wakeups(byDefault.pid), wakeups(fine.pid)];
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const perSecond = [(wakeups(byDefault.pid) - before[0]!) / 2, (wakeups(fine.pid) - before[1]!) / 2];
    console.info(`idle wake-ups a second: default ${perSecond[0]}, eventLoopResolutionMs 10: ${perSecond[1]}`);
    // 100 ms: about 10 a second besides the service's own timers; 10 ms: about 100.
    expect(perSecond[0]).toBeLessThan(40);
    expect(perSecond[1]).toBeGreaterThan(80);
    for (const service of [byDefault, fine]) {
      const text = await (await fetch(`${service.url}/metrics`)).text();
      expect(text).toMatch(/^quotafed_nodejs_eventloop_lag_p99_seconds\{[^}]*\} \d/m);
    }
  });
});

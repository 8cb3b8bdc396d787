// Redis killed mid-traffic (SIGKILL), then restarted: fail-open rules admit and are counted, fail-closed
// rules reject, the breaker opens and logs it, no request waits much longer than the command timeout, and
// the breaker closes again once Redis answers. A second instance shows the local fallback while open.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import { RATE_LIMITED_BODY } from '../../src/http/headers.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { captureLog, eventually, metricValue, seedConfig, startUpstream, type CapturedLog, type Upstream } from './fixtures.ts';

const COMMAND_TIMEOUT_MS = 250;
/** Generous on a shared 2-core machine; a hang would be the connect timeout or forever. */
const HANG_BOUND_MS = COMMAND_TIMEOUT_MS + 1_500;

const rules = [
  { name: 'open-rule', match: { endpoints: ['/open'] }, by: ['ip'], algorithm: 'fixedWindow', limit: 1000, period: '1m', failMode: 'open' },
  {
    name: 'closed-rule',
    match: { endpoints: ['/closed'] },
    by: ['ip'],
    algorithm: 'fixedWindow',
    limit: 1000,
    period: '1m',
    failMode: 'closed',
  },
  { name: 'shared', match: { endpoints: ['/shared'] }, by: ['ip'], algorithm: 'fixedWindow', limit: 10, period: '1h', failMode: 'open' },
];

describe('Redis outage', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let failModes: RegionService;
  let fallback: RegionService;
  let log: CapturedLog;

  beforeAll(async () => {
    upstream = await startUpstream();
    log = captureLog();
    const breaker = { failureThreshold: 3, probeIntervalMs: 100, successThreshold: 2 };
    failModes = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.region = 'fail-modes';
        raw.redis = { url: redis.url, commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: 500 };
        raw.upstream = { url: upstream.url };
        raw.breaker = { ...breaker, localFallback: false };
        raw.rules = rules;
      }),
      { logger: log.logger },
    );
    fallback = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.region = 'fallback';
        raw.redis = { url: redis.url, commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: 500 };
        raw.upstream = { url: upstream.url };
        // The windows began before this start: `atOnce` lets its fallback admit in them (the default waits a window).
        raw.breaker = { ...breaker, localFallback: true, instancesPerRegion: 2, localFallbackStart: 'atOnce' };
        raw.rules = rules;
      }),
      { logger: log.logger.child({ instance: 'fallback' }) },
    );
  });
  afterAll(async () => {
    await failModes?.close();
    await fallback?.close();
    await upstream?.close();
  });

  const timed = async (url: string, init?: RequestInit) => {
    const started = performance.now();
    const res = await fetch(url, init);
    const body = await res.text();
    return { res, body, ms: performance.now() - started };
  };
  const metrics = async (service: RegionService) => (await fetch(`${service.url}/metrics`)).text();
  /** The breaker state /readyz reports (readiness itself stays 200 by the fail modes). */
  const breakerOf = async (service: RegionService) =>
    ((await (await fetch(`${service.url}/readyz`)).json()) as { breaker: string }).breaker;

  it('follows the fail modes, opens the breaker, and recovers after Redis returns', async () => {
    expect((await timed(`${failModes.url}/open`)).res.status).toBe(200);
    expect((await timed(`${failModes.url}/closed`)).res.status).toBe(200);
    const admittedBefore = await metricValue(await metrics(failModes), 'quotafed_degraded_admissions_total', { mode: 'fail-open' });
    const forwardedBefore = upstream.seen.length;

    await redis.kill('SIGKILL');

    const slowest: number[] = [];
    for (let i = 0; i < 10; i++) {
      const open = await timed(`${failModes.url}/open`);
      expect(open.res.status).toBe(200);
      expect(JSON.parse(open.body)).toMatchObject({ upstream: true });
      const closed = await timed(`${failModes.url}/closed`);
      expect(closed.res.status).toBe(429);
      expect(closed.body).toBe(RATE_LIMITED_BODY);
      expect(Number(closed.res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      slowest.push(open.ms, closed.ms);
    }
    expect(Math.max(...slowest)).toBeLessThan(HANG_BOUND_MS);
    // Only the fail-open requests reached the upstream.
    expect(upstream.seen.slice(forwardedBefore).map((r) => r.path)).toEqual(Array(10).fill('/open'));

    const page = await metrics(failModes);
    expect(await metricValue(page, 'quotafed_degraded_admissions_total', { mode: 'fail-open' })).toBe(admittedBefore + 10);
    expect(await metricValue(page, 'quotafed_decisions_total', { rule: 'closed-rule', source: 'fail-closed', outcome: 'limited' })).toBe(
      10,
    );
    expect(await metricValue(page, 'quotafed_breaker_state', { region: 'fail-modes' })).toBe(1);
    expect(await metricValue(page, 'quotafed_redis_errors_total', { command: 'decide' })).toBeGreaterThanOrEqual(3);

    // Still ready: the fail modes answer, and every instance sharing this Redis would be drained at once.
    const stillReady = await fetch(`${failModes.url}/readyz`);
    expect(stillReady.status).toBe(200);
    expect(await stillReady.json()).toMatchObject({ status: 'ready', breaker: 'open', redis: { up: false } });
    const opened = log.lines().filter((line) => line.event === 'breaker.open' && line.region === 'fail-modes');
    expect(opened).toHaveLength(1);
    expect(opened[0]).toMatchObject({ level: 40, failures: 3 });

    await redis.restart();
    await eventually(async () => (await breakerOf(failModes)) === 'closed', 20_000, 'the breaker to close');
    expect(log.lines().some((line) => line.event === 'breaker.close' && line.region === 'fail-modes')).toBe(true);
    expect(await metricValue(await metrics(failModes), 'quotafed_breaker_state', { region: 'fail-modes' })).toBe(0);

    const check = await fetch(`${failModes.url}/v1/check`, {
      method: 'POST',
      body: JSON.stringify({ method: 'GET', path: '/closed', ip: '10.0.0.1' }),
    });
    const reply = (await check.json()) as { allowed: boolean; outcomes: Array<{ source: string }> };
    expect(reply.allowed).toBe(true);
    expect(reply.outcomes[0]!.source).toBe('redis');
  });

  it('enforces limit / instancesPerRegion in memory for a fail-open rule while open, and writes it to Redis after', async () => {
    await eventually(async () => (await breakerOf(fallback)) === 'closed', 20_000, 'the fallback instance to be ready');
    await redis.kill('SIGKILL');
    // The first failures (below the threshold) are decided by the local fallback already: admitted and counted.
    for (let i = 0; i < 3; i++) expect((await timed(`${fallback.url}/shared`)).res.status).toBe(200);
    expect(fallback.engine.breaker.state).toBe('open');
    // A fail-closed rule is never decided locally: rejected for the whole outage.
    for (let i = 0; i < 3; i++) expect((await timed(`${fallback.url}/closed`)).res.status).toBe(429);

    // Open: this instance's share of 10 across 2 instances is 5, of which the first failures took 3.
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const attempt = await timed(`${fallback.url}/shared`);
      expect(attempt.ms).toBeLessThan(HANG_BOUND_MS);
      statuses.push(attempt.res.status);
    }
    expect(statuses).toEqual([200, 200, 429, 429, 429, 429, 429, 429]);
    const page = await metrics(fallback);
    expect(await metricValue(page, 'quotafed_degraded_admissions_total', { mode: 'local-fallback' })).toBe(5);
    expect(await metricValue(page, 'quotafed_decisions_total', { rule: 'shared', source: 'local-fallback', outcome: 'limited' })).toBe(6);

    await redis.restart();
    await eventually(async () => (await breakerOf(fallback)) === 'closed', 20_000, 'the breaker to close');
    await eventually(
      async () => (await metricValue(await metrics(fallback), 'quotafed_fallback_settled_total')) === 5,
      5_000,
      'the fallback admissions to be settled',
    );
    // Redis decides again; its data was lost with the SIGKILL, but the 5 local admissions were written into the
    // same window: 10 - 5 - 1 left.
    const after = await timed(`${fallback.url}/shared`);
    expect(after.res.status).toBe(200);
    expect(after.res.headers.get('x-ratelimit-remaining')).toBe('4');
  });
});

// The region's own Redis link gets slow (a Toxiproxy latency toxic well above
// redis.commandTimeoutMs). No decision waits on it much longer than the command timeout; fail-open rules admit
// and count the degraded admissions, fail-closed rules answer 429; the breaker opens; removing the toxic closes
// it again and Redis decides once more.
import { performance } from 'node:perf_hooks';
import { Toxiproxy, type Latency, type Proxy, type Toxic } from 'toxiproxy-node-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startToxiproxyServer, type ToxiproxyServer } from '../../chaos/toxiproxy/server.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { eventually, metricValue, seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';

const COMMAND_TIMEOUT_MS = 150;
const LATENCY_MS = 3_000;
/** A bound, not a performance claim: a decision that waited for the slow link would take ≥ LATENCY_MS. */
const BOUND_MS = COMMAND_TIMEOUT_MS + 1_350;

describe('slow Redis through the chaos proxy', async () => {
  const redis = await useRedis();
  let toxiproxy: ToxiproxyServer;
  let proxy: Proxy;
  let upstream: Upstream;
  let service: RegionService;

  beforeAll(async () => {
    toxiproxy = await startToxiproxyServer({ port: 0 });
    const client = new Toxiproxy(toxiproxy.url);
    proxy = await client.createProxy({ name: 'own-redis', listen: '127.0.0.1:0', upstream: `127.0.0.1:${redis.port}` });
    upstream = await startUpstream();
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.redis = { url: `redis://${proxy.listen}`, commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: 1_000 };
        raw.upstream = { url: upstream.url };
        raw.breaker = { failureThreshold: 3, probeIntervalMs: 100, successThreshold: 2, localFallback: false };
        raw.rules = [
          {
            name: 'open-rule',
            match: { endpoints: ['/open'] },
            by: ['apiKey'],
            algorithm: 'fixedWindow',
            limit: 1_000,
            period: '1m',
            failMode: 'open',
          },
          {
            name: 'closed-rule',
            match: { endpoints: ['/closed'] },
            by: ['apiKey'],
            algorithm: 'fixedWindow',
            limit: 1_000,
            period: '1m',
            failMode: 'closed',
          },
        ];
      }),
    );
  });
  afterAll(async () => {
    await service?.close();
    await upstream?.close();
    await toxiproxy?.close();
  });

  const timed = async (path: string) => {
    const started = performance.now();
    const res = await fetch(`${service.url}${path}`, { headers: { 'X-API-Key': 'slow-key' } });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - started };
  };
  const metrics = async () => (await fetch(`${service.url}/metrics`)).text();

  it('bounds every decision by the command timeout, follows the fail modes, opens and recovers the breaker', async () => {
    expect((await timed('/open')).status).toBe(200);
    expect((await timed('/closed')).status).toBe(200);
    const degradedBefore = await metricValue(await metrics(), 'quotafed_degraded_admissions_total', { mode: 'fail-open' });
    const forwardedBefore = upstream.seen.length;

    const toxic: Toxic<Latency> = await proxy.addToxic<Latency>({
      name: 'slow',
      type: 'latency',
      stream: 'downstream',
      toxicity: 1,
      attributes: { latency: LATENCY_MS, jitter: 0 },
    });

    const durations: number[] = [];
    let openAdmitted = 0;
    for (let i = 0; i < 8; i++) {
      const open = await timed('/open');
      const closed = await timed('/closed');
      durations.push(open.ms, closed.ms);
      expect(open.status).toBe(200);
      expect(closed.status).toBe(429);
      openAdmitted += 1;
    }
    expect(Math.max(...durations), durations.map(Math.round).join(',')).toBeLessThan(BOUND_MS);
    console.info(
      `slow Redis (+${LATENCY_MS} ms, command timeout ${COMMAND_TIMEOUT_MS} ms): slowest decision ` +
        `${Math.round(Math.max(...durations))} ms over ${durations.length}`,
    );
    expect(service.engine.breaker.state).toBe('open');
    const text = await metrics();
    expect(await metricValue(text, 'quotafed_breaker_state')).toBe(1);
    expect((await metricValue(text, 'quotafed_degraded_admissions_total', { mode: 'fail-open' })) - degradedBefore).toBe(openAdmitted);
    expect(await metricValue(text, 'quotafed_redis_errors_total', { command: 'decide', kind: 'timeout' })).toBeGreaterThanOrEqual(3);
    // Fail-open requests still reach the upstream; fail-closed ones never do.
    expect(upstream.seen.slice(forwardedBefore).map((r) => r.path)).toEqual(Array(8).fill('/open'));
    // Ready by the fail modes (they answer); the breaker and Redis's health are in the body.
    const ready = await fetch(`${service.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ breaker: 'open' });

    await toxic.remove();

    await eventually(() => service.engine.breaker.state === 'closed', 10_000, 'the breaker to close');
    const check = await fetch(`${service.url}/v1/check`, {
      method: 'POST',
      body: JSON.stringify({ apiKey: 'slow-key', method: 'GET', path: '/closed' }),
    });
    const decision = (await check.json()) as { allowed: boolean; outcomes: Array<{ source: string }> };
    expect(decision.allowed).toBe(true);
    expect(decision.outcomes[0]!.source).toBe('redis');
    expect((await fetch(`${service.url}/readyz`)).status).toBe(200);
  });
});

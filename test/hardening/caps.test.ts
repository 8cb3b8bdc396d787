// Memory: every cache a client can grow has a cap. Each one is driven with more distinct keys
// than its cap; the size stays at the cap (and the heap with it), and what an outage filled is emptied after it.
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Rule } from '../../src/config/schema.ts';
import { createLocalFallback, DEFAULT_LOCAL_CAPACITY } from '../../src/engine/local-fallback.ts';
import { createOverLimitCache } from '../../src/engine/over-limit-cache.ts';
import { matchRules } from '../../src/engine/rules.ts';
import type { RuleOutcome } from '../../src/engine/types.ts';
import { alreadyApplied, RETAINED } from '../../src/federation/gossip/replay.ts';
import { runApplyJob } from '../../src/store/gossip-calls.ts';
import { withScripts } from '../../src/store/commands.ts';
import { keyLayout, replayKey } from '../../src/keys.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { eventually, metricValue, seedConfig } from '../service/fixtures.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapAfterGc(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

const rule = (overrides: Partial<Rule> = {}): Rule => ({
  name: 'r',
  match: { identity: 'any' },
  by: ['apiKey'],
  algorithm: 'fixedWindow',
  limit: 1,
  period: 60_000,
  leaseTtl: 30_000,
  failMode: 'open',
  shadow: false,
  maxWaitMs: 0,
  countResponses: 'all',
  ...overrides,
});

const denial = (key: string): RuleOutcome => ({
  rule: 'r',
  algorithm: 'fixedWindow',
  allowed: false,
  limit: 1,
  remaining: 0,
  resetAtMs: Date.now() + 60_000,
  retryAfterMs: 60_000,
  periodMs: 60_000,
  shadow: false,
  failMode: 'open',
  source: 'redis',
  ...({ key } as object),
});

describe('in-process caps', () => {
  it('the over-limit cache holds at most its cap, oldest evicted first, with a heap that stops growing', () => {
    // The service's cap is 100,000 (redis-engine.ts); 20,000 shows the same shape in a fraction of the time.
    const cap = 20_000;
    const cache = createOverLimitCache(cap);
    const before = heapAfterGc();
    for (let i = 0; i < cap; i++) cache.remember(`qf:{s1}:r:${String(i).padStart(16, '0')}`, denial(String(i)), 1);
    const atCap = heapAfterGc();
    for (let i = cap; i < 2.5 * cap; i++) cache.remember(`qf:{s1}:r:${String(i).padStart(16, '0')}`, denial(String(i)), 1);
    const after = heapAfterGc();
    expect(cache.size).toBe(cap);
    const perEntry = (atCap - before) / cap;
    // Generous: 1.5 × cap more distinct keys must not add more than a tenth of what the first cap took.
    expect(after - atCap).toBeLessThan(0.1 * (atCap - before) + 8 * 1024 * 1024);
    expect(perEntry).toBeLessThan(2_000);
    console.info(
      `over-limit cache: ~${Math.round(perEntry)} bytes/entry (~${Math.round((perEntry * 100_000) / 1048576)} MB at the ` +
        `service's 100,000-entry cap)`,
    );
  });

  it('the over-limit cache forgets an entry once its retry time passed', () => {
    let now = 1_000_000;
    const cache = createOverLimitCache(10, () => now);
    const config = seedConfig('redis://127.0.0.1:1');
    const matched = matchRules(config, { apiKey: 'k', ip: '127.0.0.1', method: 'GET', path: '/checkout' });
    for (const entry of matched) cache.remember(entry.key, { ...denial(entry.key), retryAfterMs: 500 }, 1);
    expect(cache.size).toBe(matched.length);
    now += 501;
    expect(cache.lookup(matched, 1)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('a denial held for less than its retry time (a federation) still answers the retry time Redis gave', () => {
    let now = 1_000_000;
    const cache = createOverLimitCache(10, () => now);
    const config = seedConfig('redis://127.0.0.1:1');
    const matched = matchRules(config, { apiKey: 'k', ip: '127.0.0.1', method: 'GET', path: '/checkout' });
    // Redis said: retry in 5 s. A federated region holds the denial one sync interval (100 ms) at most.
    for (const entry of matched) cache.remember(entry.key, { ...denial(entry.key), retryAfterMs: 5_000 }, 1, 100);
    now += 40;
    // Retry-After counts down to the time Redis gave, not to the end of the hold (60 ms: "Retry-After: 1").
    expect(cache.lookup(matched, 1)?.retryAfterMs).toBe(4_960);
    now += 61;
    expect(cache.lookup(matched, 1)).toBeUndefined();
  });

  it('the local fallback holds at most its capacity for every algorithm', () => {
    const capacity = 1_000;
    const local = createLocalFallback({ instancesPerRegion: 1, capacity });
    const rules = [
      rule(),
      rule({ name: 'tb', algorithm: 'tokenBucket', burst: 5 }),
      rule({ name: 'cc', algorithm: 'concurrency', limit: 2 }),
    ];
    let admitted = 0;
    for (let i = 0; i < 5 * capacity; i++) {
      const decided = local.decide(
        rules.map((r) => ({ rule: r, key: `${r.name}:${i}` })),
        1,
        Date.now(),
      );
      if (decided.allowed) admitted += 1;
      local.release(decided.leases);
      expect(local.size).toBeLessThanOrEqual(capacity);
    }
    // Full of keys that still count (running windows, buckets not yet refilled): new keys are refused, not evicted.
    expect(local.size).toBeGreaterThanOrEqual(capacity - 2);
    expect(admitted).toBeLessThan(capacity);
    expect(DEFAULT_LOCAL_CAPACITY).toBe(100_000);
    local.clear();
    expect(local.size).toBe(0);
  });
});

describe('caps in Redis and on a running service', async () => {
  const redis = await useRedis();
  let service: RegionService;
  let admin: Redis;

  beforeAll(async () => {
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.redis = { url: redis.url, commandTimeoutMs: 300, connectTimeoutMs: 500 };
        // Admits at once after this start (the test's window began before it): the keys it fills are the point here.
        raw.breaker = { failureThreshold: 2, probeIntervalMs: 100, successThreshold: 1, localFallback: true, localFallbackStart: 'atOnce' };
      }),
    );
  });
  afterAll(async () => {
    await service?.close();
    admin?.disconnect();
  });

  it('the gossip replay record keeps at most RETAINED sequence numbers per sender', async () => {
    const scripted = withScripts(admin);
    const total = RETAINED + 500;
    for (let start = 0; start < total; start += 1_000) {
      await Promise.all(
        Array.from({ length: Math.min(1_000, total - start) }, (_, i) =>
          // A job with no entries, as the receiver applies it: the record and the heard mark.
          runApplyJob(
            scripted,
            {
              replayKey: keyLayout().replayKey('eu-west'),
              seq: 1_000_000 + start + i,
              retained: RETAINED,
              metaKey: keyLayout().metaKey,
              heardField: 'heard:eu-west',
              heardAt: Date.now(),
            },
            [],
          ),
        ),
      );
    }
    expect(await admin.zcard(replayKey('eu-west'))).toBe(RETAINED);
    // The newest survive: the oldest retained is above the first ones recorded.
    const [, oldest] = await admin.zrange(replayKey('eu-west'), '0', '0', 'WITHSCORES');
    expect(Number(oldest)).toBeGreaterThanOrEqual(1_000_000 + total - RETAINED - 1_000);
    // A recorded number is a replay; so is one below the oldest kept once the record is full; a newer one is not.
    expect(await alreadyApplied(scripted, keyLayout(), 'eu-west', 1_000_000 + total - 1)).toBe(true);
    expect(await alreadyApplied(scripted, keyLayout(), 'eu-west', 1_000_000)).toBe(true);
    expect(await alreadyApplied(scripted, keyLayout(), 'eu-west', 1_000_000 + total)).toBe(false);
    expect(await alreadyApplied(scripted, keyLayout(), 'ap-south', 1_000_000)).toBe(false);
  });

  it('caps dashboard event streams (16) and frees a slot when a client leaves', async () => {
    const controllers = Array.from({ length: 16 }, () => new AbortController());
    const streams = await Promise.all(controllers.map((c) => fetch(`${service.url}/dashboard/events`, { signal: c.signal })));
    expect(streams.every((s) => s.status === 200)).toBe(true);
    const refused = await fetch(`${service.url}/dashboard/events`);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    controllers.forEach((c) => c.abort());
    await Promise.all(streams.map((s) => s.body?.cancel().catch(() => undefined)));
    await eventually(
      async () => {
        const again = await fetch(`${service.url}/dashboard/events`);
        const ok = again.status === 200;
        await again.body?.cancel().catch(() => undefined);
        return ok;
      },
      5_000,
      'a stream slot to free up',
    );
  });

  it('the local fallback filled during an outage stays bounded and keeps only windows still running when Redis returns', async () => {
    const metrics = async () => (await fetch(`${service.url}/metrics`)).text();
    const check = (apiKey: string) =>
      fetch(`${service.url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey, method: 'GET', path: '/search' }) }).then(
        (r) => r.json() as Promise<{ allowed: boolean }>,
      );
    await redis.kill('SIGKILL');
    try {
      await eventually(
        async () => {
          await check('probe');
          return service.engine.breaker.state === 'open';
        },
        10_000,
        'the breaker to open',
      );
      for (let i = 0; i < 300; i++) await check(`outage-key-${i}`);
      expect(await metricValue(await metrics(), 'quotafed_local_fallback_keys')).toBeGreaterThanOrEqual(300);
    } finally {
      await redis.restart();
    }
    await eventually(() => service.engine.breaker.state === 'closed', 10_000, 'the breaker to close');
    // The /search rule's window (1 minute) is still running: its counts stay (a flapping breaker must not hand
    // the share out again), bounded by the capacity; what ended is pruned on close.
    const kept = await metricValue(await metrics(), 'quotafed_local_fallback_keys');
    expect(kept).toBeGreaterThanOrEqual(300);
    expect(kept).toBeLessThanOrEqual(DEFAULT_LOCAL_CAPACITY);
  });
});

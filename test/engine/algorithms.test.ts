// The decision scripts against a real redis-server, with the clock pinned through the engine's test hook
// so refill and window boundaries are exact.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { STATE_KEY_PATTERN, shardOf } from '../../src/keys.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);

let clock = 1_800_000_000_000;
const T0 = clock;

function engineFor(rules: ConfigInput['rules']) {
  const config = parseConfig({ region: 'us-east', rules });
  return createRedisEngine({ config, redis, overLimitCache: false, nowMs: () => clock });
}

let caller = 0;
const freshKey = () => `key-${++caller}-${Math.random()}`;
const request = (apiKey: string, path = '/', cost = 1) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path, cost });

describe('token bucket', () => {
  const engine = engineFor([{ name: 'tb', by: ['apiKey'], algorithm: 'tokenBucket', limit: 10, period: '10s', burst: 10 }]);

  it('admits the capacity, then refills at the rate, and a denial writes nothing', async () => {
    clock = T0;
    const key = freshKey();
    for (let i = 0; i < 10; i++) expect((await engine.decide(request(key))).allowed).toBe(true);
    const denied = await engine.decide(request(key));
    expect(denied.allowed).toBe(false);
    expect(denied.binding?.retryAfterMs).toBe(1000);
    const stateKey = (await redis.keys('qf:*:tb:*')).find(Boolean)!;
    // One number, the µs at which the bucket is full again (lua/includes/gcra.lua), kept as an integer by Redis:
    // 10 tokens of 1 s each taken at T0.
    expect(await redis.get(stateKey)).toBe(String(T0 * 1000 + 10_000_000));
    expect(await redis.object('ENCODING', stateKey)).toBe('int');
    const before = await redis.get(stateKey);
    clock += 500;
    expect((await engine.decide(request(key))).allowed).toBe(false);
    expect(await redis.get(stateKey)).toBe(before);
    clock += 500;
    const refilled = await engine.decide(request(key));
    expect(refilled.allowed).toBe(true);
    expect(refilled.binding?.remaining).toBe(0);
  });

  it('charges the cost in tokens and sets a TTL of the time to refill to full', async () => {
    clock = T0 + 1_000_000;
    const key = freshKey();
    await redis.flushdb();
    const first = await engine.decide(request(key, '/', 4));
    expect(first.binding?.remaining).toBe(6);
    const stateKey = (await redis.keys('qf:*'))[0]!;
    const ttl = await redis.pttl(stateKey);
    expect(ttl).toBeGreaterThan(4000);
    expect(ttl).toBeLessThanOrEqual(4000 + 1000);
    expect((await engine.decide(request(key, '/', 7))).allowed).toBe(false);
    expect((await engine.decide(request(key, '/', 6))).allowed).toBe(true);
  });
});

describe('fixed window', () => {
  const engine = engineFor([{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 3, period: '10s' }]);

  it('admits the limit per window and starts again at the boundary', async () => {
    clock = T0 + 2_000_000;
    const key = freshKey();
    const results = [];
    for (let i = 0; i < 5; i++) results.push((await engine.decide(request(key))).allowed);
    expect(results).toEqual([true, true, true, false, false]);
    const denied = await engine.decide(request(key));
    expect(denied.binding?.retryAfterMs).toBe(10_000 - (clock % 10_000));
    expect(denied.binding?.resetAtMs).toBe(Math.floor(clock / 10_000) * 10_000 + 10_000);
    clock = Math.floor(clock / 10_000) * 10_000 + 10_000;
    expect((await engine.decide(request(key))).allowed).toBe(true);
  });

  it('sets a TTL derived from the period', async () => {
    await redis.flushdb();
    clock = T0 + 3_000_000;
    await engine.decide(request(freshKey()));
    const [stateKey] = await redis.keys('qf:*');
    const ttl = await redis.pttl(stateKey!);
    expect(ttl).toBeGreaterThan(10_000);
    expect(ttl).toBeLessThanOrEqual(2 * 10_000 + 1000 + 1000);
  });
});

describe('sliding window counter', () => {
  const engine = engineFor([{ name: 'sw', by: ['apiKey'], algorithm: 'slidingWindow', limit: 10, period: '10s' }]);

  it('weights the previous window by its overlap', async () => {
    clock = T0 + 4_000_000; // a window start
    const key = freshKey();
    for (let i = 0; i < 10; i++) expect((await engine.decide(request(key))).allowed).toBe(true);
    // A quarter into the next window, 75% of the previous 10 still count: 2 more fit (7.5 + 2 <= 10).
    clock += 12_500;
    const admitted = [];
    for (let i = 0; i < 4; i++) admitted.push((await engine.decide(request(key))).allowed);
    expect(admitted).toEqual([true, true, false, false]);
  });
});

describe('sliding window log', () => {
  const engine = engineFor([{ name: 'sl', by: ['apiKey'], algorithm: 'slidingLog', limit: 3, period: '10s' }]);

  it('is exact over any 10 s and says when the oldest entry slides out', async () => {
    clock = T0 + 5_000_000;
    const key = freshKey();
    for (let i = 0; i < 3; i++) {
      expect((await engine.decide(request(key))).allowed).toBe(true);
      clock += 1000;
    }
    const denied = await engine.decide(request(key));
    expect(denied.allowed).toBe(false);
    expect(denied.binding?.retryAfterMs).toBe(7000);
    clock += 7000;
    expect((await engine.decide(request(key))).allowed).toBe(true);
  });
});

describe('concurrency', () => {
  const engine = engineFor([{ name: 'cc', by: ['apiKey'], algorithm: 'concurrency', limit: 2, leaseTtl: '5s' }]);

  it('holds slots as leases: release frees one, and a crashed holder’s lease expires', async () => {
    clock = T0 + 6_000_000;
    const key = freshKey();
    const first = await engine.decide(request(key));
    const second = await engine.decide(request(key));
    expect(first.leases).toHaveLength(1);
    expect(second.allowed).toBe(true);
    expect((await engine.decide(request(key))).allowed).toBe(false);
    await engine.release(first.leases);
    expect((await engine.decide(request(key))).allowed).toBe(true);
    // Nobody releases now: the leases expire after leaseTtl.
    clock += 5001;
    expect((await engine.decide(request(key))).allowed).toBe(true);
  });
});

describe('several rules', () => {
  const engine = engineFor([
    { name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 5, period: '1m' },
    {
      name: 'search',
      match: { identity: 'apiKey', endpoints: ['/search'] },
      by: ['apiKey', 'endpoint'],
      algorithm: 'fixedWindow',
      limit: 2,
      period: '1m',
    },
    {
      name: 'checkout',
      match: { identity: 'apiKey', endpoints: ['/checkout'] },
      by: ['apiKey', 'endpoint'],
      algorithm: 'fixedWindow',
      limit: 1,
      period: '1m',
    },
    { name: 'per-ip', match: { identity: 'any', endpoints: ['/ip/*'] }, by: ['ip'], algorithm: 'fixedWindow', limit: 1, period: '1m' },
  ]);

  it('keeps endpoint budgets independent and a denial by any rule consumes from none', async () => {
    clock = T0 + 7_000_020;
    const key = freshKey();
    expect((await engine.decide(request(key, '/search'))).allowed).toBe(true);
    expect((await engine.decide(request(key, '/search'))).allowed).toBe(true);
    const deniedSearch = await engine.decide(request(key, '/search'));
    expect(deniedSearch.allowed).toBe(false);
    expect(deniedSearch.binding?.rule).toBe('search');
    // The denied /search did not consume from per-key: 3 of 5 remain, checkout has its own budget.
    const checkout = await engine.decide(request(key, '/checkout'));
    expect(checkout.allowed).toBe(true);
    expect(checkout.outcomes.find((o) => o.rule === 'per-key')?.remaining).toBe(2);
    expect((await engine.decide(request(key, '/checkout'))).allowed).toBe(false);
    expect((await engine.decide(request(key, '/other'))).outcomes.find((o) => o.rule === 'per-key')?.remaining).toBe(1);
  });

  it('refunds the API-key rule when an IP rule in another slot denies', async () => {
    clock = T0 + 8_000_020;
    let key = freshKey();
    while (shardOf(key) === shardOf('10.0.0.1')) key = freshKey();
    expect((await engine.decide(request(key, '/ip/a'))).allowed).toBe(true);
    const denied = await engine.decide(request(key, '/ip/b'));
    expect(denied.allowed).toBe(false);
    expect(denied.binding?.rule).toBe('per-ip');
    const next = await engine.decide(request(key, '/x'));
    // One admission so far under per-key: the refunded one does not count.
    expect(next.outcomes.find((o) => o.rule === 'per-key')?.remaining).toBe(3);
  });
});

describe('client-supplied key material', () => {
  const engine = engineFor([{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1, period: '1m' }]);

  it('hashes braces, colons, unicode and 8 KB keys into distinct, well-formed keys', async () => {
    clock = T0 + 9_000_000;
    await redis.flushdb();
    const hostile = ['{a}', 'a}{b', ':::', 'qf:{s1}:fw:x', '🔑ключ', 'x'.repeat(8192), '{}', 'a\u0000b'];
    for (const apiKey of hostile) expect((await engine.decide(request(apiKey))).allowed).toBe(true);
    const keys = await redis.keys('qf:*');
    expect(keys).toHaveLength(hostile.length);
    for (const key of keys) expect(key).toMatch(STATE_KEY_PATTERN);
    for (const apiKey of hostile) expect((await engine.decide(request(apiKey))).allowed).toBe(false);
  });
});

// Local leases (rules[].lease) against a real redis-server: a hot key's units are taken in the decide call, spent
// from memory, and what is left goes back when the lease ends or the engine closes.
import { bucketTokens, stateFields } from '../support/state-key.ts';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { ConfigError } from '../../src/config/load.ts';
import { createRedisEngine, type RedisDecisionEngine } from '../../src/engine/redis-engine.ts';
import { layoutOf } from '../../src/keys.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);

const HOUR = 3_600_000;
const request = (apiKey: string, cost = 1) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/', cost });
let caller = 0;
const freshKey = () => `lease-${++caller}-${Math.random()}`;

const open: RedisDecisionEngine[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((engine) => engine.close()));
});

/** A rule on the API key with a local lease. */
function leasedRule(name: string, algorithm: string, limit: number, period: number, lease: { size: number; ttlMs: number }) {
  return { name, by: ['apiKey'], algorithm, limit, period, lease };
}

function engineFor(rule: object, nowMs?: () => number) {
  const config = parseConfig({ region: 'us-east', rules: [rule] });
  const engine = createRedisEngine({ config, redis, overLimitCache: false, ...(nowMs ? { nowMs } : {}) });
  open.push(engine);
  return { engine, config };
}

/** This region's count of `apiKey` in its current fixed window (federation.lua's layout for one region). */
async function windowCount(config: ReturnType<typeof parseConfig>, rule: string, apiKey: string, period: number, now = Date.now()) {
  const key = layoutOf(config).ruleKey(rule, { principal: apiKey, dimensions: [apiKey] });
  const id = Math.floor(now / period);
  const held = await redis.hmget(key, `w${id % 3}`, `c${id % 3}.0`);
  return Number(held[0]) === id ? Number(held[1] ?? 0) : 0;
}

describe('a rule with a local lease', () => {
  it('takes the lease on the second request of a key, spends it from memory and gives the rest back on close', async () => {
    const rule = leasedRule('fw', 'fixedWindow', 100, HOUR, { size: 10, ttlMs: 10_000 });
    const { engine, config } = engineFor(rule);
    const key = freshKey();
    const first = await engine.decide(request(key));
    expect(first.binding?.source).toBe('redis');
    // Seen once: no lease yet.
    expect(await windowCount(config, 'fw', key, HOUR)).toBe(1);
    const second = await engine.decide(request(key));
    expect(second.binding?.source).toBe('redis');
    expect(second.binding?.remaining).toBe(98);
    // The second request and a lease of 10 in one call.
    expect(await windowCount(config, 'fw', key, HOUR)).toBe(12);
    const fromMemory = [];
    for (let i = 0; i < 4; i++) fromMemory.push(await engine.decide(request(key)));
    expect(fromMemory.map((d) => d.binding?.source)).toEqual(['lease', 'lease', 'lease', 'lease']);
    expect(fromMemory.map((d) => d.binding?.remaining)).toEqual([97, 96, 95, 94]);
    expect(await windowCount(config, 'fw', key, HOUR)).toBe(12);
    // Closing gives back the 6 units it did not spend: Redis counts what was admitted, 6 requests.
    await engine.close();
    expect(await windowCount(config, 'fw', key, HOUR)).toBe(6);
  });

  it('never admits more than the limit across engines sharing a Redis, and counts exactly what they admitted', async () => {
    const rule = leasedRule('fw2', 'fixedWindow', 60, HOUR, { size: 8, ttlMs: 10_000 });
    const engines = [engineFor(rule), engineFor(rule), engineFor(rule)];
    const key = freshKey();
    let admitted = 0;
    // Each engine sends 40 requests, 4 in flight at a time: 120 in all against a limit of 60.
    await Promise.all(
      engines.map(async ({ engine }) => {
        for (let round = 0; round < 10; round++) {
          const decisions = await Promise.all(Array.from({ length: 4 }, () => engine.decide(request(key))));
          admitted += decisions.filter((d) => d.allowed).length;
        }
      }),
    );
    expect(admitted).toBeLessThanOrEqual(60);
    // Leases may still hold unspent units; closed, each gives its rest back and Redis counts the admissions.
    await Promise.all(engines.map(({ engine }) => engine.close()));
    expect(await windowCount(engines[0]!.config, 'fw2', key, HOUR)).toBe(admitted);
    // At most 3 engines x 8 units could stand unspent while the others were refused.
    expect(admitted).toBeGreaterThanOrEqual(60 - 3 * 8);
  });

  it("sizes a lease to what the key's rate will spend within its time, at most its size", async () => {
    const rule = leasedRule('paced', 'fixedWindow', 1000, HOUR, { size: 50, ttlMs: 1_000 });
    const { engine, config } = engineFor(rule);
    const key = freshKey();
    await engine.decide(request(key));
    await new Promise((resolve) => setTimeout(resolve, 250));
    // A request every 250 ms or so (more on a loaded machine, never less): at most 4 within 1 s, not 50.
    await engine.decide(request(key));
    const taken = (await windowCount(config, 'paced', key, HOUR)) - 2;
    expect(taken).toBeGreaterThanOrEqual(1);
    expect(taken).toBeLessThanOrEqual(4);
  });

  it('returns a token bucket lease when its time is over', async () => {
    const rule = leasedRule('tb', 'tokenBucket', 1000, HOUR, { size: 50, ttlMs: 1_000 });
    const { engine, config } = engineFor(rule);
    const key = freshKey();
    await engine.decide(request(key));
    await engine.decide(request(key));
    const state = layoutOf(config).ruleKey('tb', { principal: key, dimensions: [key] });
    const bucket = { limit: 1000, periodMs: HOUR, burst: 1000 };
    const afterTake = await bucketTokens(redis, state, bucket, Date.now());
    // 1000 - 2 requests - the lease (sized to the gap between the two requests, at most 50; a hair of refill aside).
    const taken = Math.round(998 - afterTake);
    expect(taken).toBeGreaterThanOrEqual(2);
    expect(taken).toBeLessThanOrEqual(50);
    expect((await engine.decide(request(key))).binding?.source).toBe('lease');
    // The lease ends after 1 s; the sweep (every 500 ms) gives back the units it did not spend.
    await new Promise((resolve) => setTimeout(resolve, 1_700));
    expect(await bucketTokens(redis, state, bucket, Date.now())).toBeGreaterThanOrEqual(afterTake + taken - 1);
    // An ended lease admits nothing from memory.
    expect((await engine.decide(request(key))).binding?.source).toBe('redis');
  });

  it('ends a window lease with its window, whatever its time', async () => {
    const period = 60_000;
    // Redis's clock pinned 1 s before a window ends.
    let clock = Math.ceil(Date.now() / period) * period + 10 * period - 1_000;
    const rule = leasedRule('edge', 'fixedWindow', 100, period, { size: 20, ttlMs: 30_000 });
    const { engine, config } = engineFor(rule, () => clock);
    const key = freshKey();
    await engine.decide(request(key));
    await engine.decide(request(key));
    expect(await windowCount(config, 'edge', key, period, clock)).toBe(22);
    expect((await engine.decide(request(key))).binding?.source).toBe('lease');
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    clock += 1_200;
    // Its window is over: the next request is Redis's, counted in the new window with a new lease of 20 (the key is
    // still hot), none of the old window's units.
    const next = await engine.decide(request(key));
    expect(next.binding?.source).toBe('redis');
    expect(await windowCount(config, 'edge', key, period, clock)).toBe(21);
  });

  it("counts a federated region's lease in its own cell, as admissions the peers hear of", async () => {
    const config = parseConfig({
      region: 'us-east',
      federation: { leakageBudget: 0, peers: [{ name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' }] },
      rules: [{ name: 'fed', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: HOUR, lease: { size: 10, ttlMs: 10_000 } }],
    });
    // A brand-new region: no data lost (otherwise the decide fences its first window).
    await markShardsIntact(redis);
    const engine = createRedisEngine({ config, redis, overLimitCache: false });
    open.push(engine);
    const key = freshKey();
    await engine.decide(request(key));
    const second = await engine.decide(request(key));
    expect(second.binding?.source).toBe('redis');
    const state = layoutOf(config).ruleKey('fed', { principal: key, dimensions: [key] });
    const id = Math.floor(Date.now() / HOUR);
    const { selfIndex } = topologyOf(config);
    // Two requests and a lease of 10 in this region's count of the window.
    expect(Number((await stateFields(redis, state))[`c${id % 3}.${selfIndex}`])).toBe(12);
    expect((await engine.decide(request(key))).binding?.source).toBe('lease');
    // This region's share is 50 of 100: leases never take beyond what it can admit.
    const sources: string[] = [];
    for (let i = 0; i < 60; i++) {
      const decision = await engine.decide(request(key));
      if (decision.allowed) sources.push(decision.binding!.source);
    }
    expect(Number((await stateFields(redis, state))[`c${id % 3}.${selfIndex}`])).toBeLessThanOrEqual(50);
    expect(sources.length + 3).toBeLessThanOrEqual(50);
  });

  it('does not lease for a request that also matches a rule without a lease', async () => {
    const config = parseConfig({
      region: 'us-east',
      rules: [
        { name: 'leased', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: HOUR, lease: { size: 10, ttlMs: 10_000 } },
        { name: 'plain', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: HOUR },
      ],
    });
    const engine = createRedisEngine({ config, redis, overLimitCache: false });
    open.push(engine);
    const key = freshKey();
    for (let i = 0; i < 3; i++) expect((await engine.decide(request(key))).outcomes.every((o) => o.source === 'redis')).toBe(true);
    expect(await windowCount(config, 'leased', key, HOUR)).toBe(3);
  });

  it('is refused where it cannot hold, naming the field', () => {
    const base = { name: 'r', by: ['apiKey'], limit: 10, period: HOUR } as const;
    const bad = [
      { ...base, algorithm: 'concurrency', lease: { size: 2 } },
      { ...base, algorithm: 'fixedWindow', shadow: true, lease: { size: 2 } },
      { ...base, algorithm: 'fixedWindow', lease: { size: 11 } },
      { ...base, algorithm: 'tokenBucket', countResponses: 'failed', lease: { size: 2 } },
    ] as const;
    for (const rule of bad) {
      expect(() => parseConfig({ region: 'us-east', rules: [rule] })).toThrow(ConfigError);
      expect(() => parseConfig({ region: 'us-east', rules: [rule] })).toThrow(/rules\.0\.lease|rules\[0\]\.lease/);
    }
    expect(
      parseConfig({ region: 'us-east', rules: [{ ...base, algorithm: 'slidingWindow', lease: { size: 2 } }] }).rules[0]!.lease,
    ).toEqual({
      size: 2,
      ttlMs: 100,
    });
  });
});

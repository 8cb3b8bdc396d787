// The decision hot path's shortcuts against a real redis-server: decide through Redis Functions (and a Redis
// that lost them), the bounded identity cache, and rules matched once by the resilient wrapper.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { createIdentityCache, IDENTITY_CACHE_MAX, identityCacheKey } from '../../src/engine/identity-cache.ts';
import { identityCacheSize, matchRules } from '../../src/engine/rules.ts';
import { luaSource } from '../../src/store/commands.ts';
import { decideCall, parseDecideReply } from '../../src/store/decide-calls.ts';
import { decideLibrary } from '../../src/store/library.ts';
import { identityHash, ruleKey, shardMarkerKey, shardOf } from '../../src/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);
const clock = 1_800_000_000_000;
const request = (apiKey: string) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/', cost: 1 });

describe('decide through Redis Functions', () => {
  const config = parseConfig({
    region: 'us-east',
    rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 3, period: '1m' }],
  });

  it('loads the library once, keeps counting after the functions are lost, and answers like the script', async () => {
    const engine = createRedisEngine({ config, redis, overLimitCache: false, nowMs: () => clock });
    // One region: the single-region library (decide_single.lua); a federated config loads decide.lua's.
    const { library } = decideLibrary('decideSingleRegion');
    expect((await engine.decide(request('a'))).allowed).toBe(true);
    const libraries = (await redis.call('FUNCTION', 'LIST', 'LIBRARYNAME', library)) as unknown[];
    expect(libraries).toHaveLength(1);
    // What a restart without persistence does to functions (the state key survives here, so counts go on).
    await redis.call('FUNCTION', 'FLUSH');
    expect((await engine.decide(request('a'))).binding?.remaining).toBe(1);
    const third = await engine.decide(request('a'));
    expect(third.allowed).toBe(true);
    expect(third.binding?.remaining).toBe(0);
    const denied = await engine.decide(request('a'));
    expect(denied.allowed).toBe(false);
    // The script path, on a fresh key, gives the same answers call by call.
    const key = ruleKey('fw', { principal: 'b', dimensions: ['b'] });
    const sha = (await redis.script('LOAD', luaSource('decide'))) as string;
    const viaScript: ReturnType<typeof parseDecideReply>[] = [];
    for (let i = 0; i < 4; i++) {
      // KEYS: marker, state key; ARGV: self 0, one region, units, skew, one rule, now; then the rule's ten values.
      const call = decideCall({
        fixedKeys: [shardMarkerKey(shardOf('b'))],
        ruleKeys: [key],
        rules: [{ head: ['fw', 3, 60_000, 3], budget: 0, leaseTtl: 30_000, shadow: 0 }],
        topology: { selfIndex: 0, unitsCsv: '1000000', maxClockSkewMs: 1000, horizonMs: 600 },
        regions: 1,
        cost: 1,
        leaseId: '',
        now: clock,
      });
      expect(call).toEqual([
        2,
        shardMarkerKey(shardOf('b')),
        key,
        0,
        1,
        '1000000',
        1000,
        1,
        clock,
        'fw',
        3,
        60_000,
        3,
        1,
        0,
        30_000,
        '',
        0,
        // no local lease asked
        0,
        // the gossip horizon after the last rule, then peek (0: decide and spend)
        600,
        0,
      ]);
      viaScript.push(parseDecideReply(await redis.evalsha(sha, ...(call as [number, ...(string | number)[]])), 1));
    }
    expect(viaScript.map((reply) => reply.rules[0]!.allowed)).toEqual([true, true, true, false]);
    expect(viaScript.map((reply) => reply.rules[0]!.remaining)).toEqual([2, 1, 0, 0]);
    await engine.close();
  });
});

describe('identity cache', () => {
  const config = () =>
    parseConfig({
      region: 'us-east',
      rules: [{ name: 'r', by: ['apiKey', 'method'], algorithm: 'fixedWindow', limit: 3, period: '1m' }],
    });

  it('is bounded whatever number of distinct callers arrives, and never changes a key', () => {
    const rules = config();
    const first = matchRules(rules, request('caller-0'))[0]!;
    let largest = 0;
    for (let i = 0; i < IDENTITY_CACHE_MAX + 500; i++) {
      // Twice each: the doorkeeper admits a caller the second time it is seen. A caller who keeps coming back
      // between them keeps most lookups hitting, so the cache looks up (and keeps) every call.
      for (let hot = 0; hot < 3; hot++) matchRules(rules, request('hot'));
      matchRules(rules, request(`caller-${i}`));
      matchRules(rules, request(`caller-${i}`));
      largest = Math.max(largest, identityCacheSize(rules));
    }
    expect(largest).toBe(IDENTITY_CACHE_MAX);
    expect(identityCacheSize(rules)).toBeLessThan(IDENTITY_CACHE_MAX);
    // Evicted and computed again: the same key and shard as the uncached layout.
    const again = matchRules(rules, request('caller-0'))[0]!;
    expect(again.key).toBe(first.key);
    expect(again.key).toBe(ruleKey('r', { principal: 'caller-0', dimensions: ['caller-0', 'GET'] }));
    expect(again.shard).toBe(first.shard);
    // An 8 KB API key is hashed every time, not kept.
    const size = identityCacheSize(rules);
    matchRules(rules, request('k'.repeat(8192)));
    matchRules(rules, request('k'.repeat(8192)));
    expect(identityCacheSize(rules)).toBe(size);
  });

  it('keeps callers that come back and few of those seen once (the doorkeeper)', () => {
    const rules = config();
    for (let i = 0; i < 10_000; i++) matchRules(rules, request(`once-${i}`));
    // Only the doorkeeper's false positives: at most a quarter of its bits are ever set.
    const afterOneOffs = identityCacheSize(rules);
    expect(afterOneOffs).toBeLessThan(2_500);
    // The one-offs left the cache sampling its lookups (and so its offers): the callers that come back enter through
    // the calls it looks up, until enough of those hit for it to look up (and offer) every call again.
    for (let round = 0; round < 80; round++) for (let i = 0; i < 1_000; i++) matchRules(rules, request(`steady-${i}`));
    expect(identityCacheSize(rules) - afterOneOffs).toBe(1_000);
  });
});

describe('identity cache lookups', () => {
  const identity = (name: string) => ({ key: `qf:{s0}:r:${identityHash('r', [name])}`, principal: name, shard: 0 });
  const remember = (cache: ReturnType<typeof createIdentityCache>, name: string) => {
    // Twice: the doorkeeper admits an identity the second time it is offered.
    cache.offer(0, name, identity(name), identityHash('r', [name]));
    cache.offer(0, name, identity(name), identityHash('r', [name]));
  };

  it('files a one-dimension rule under the value itself and longer ones under their framed values', () => {
    expect(identityCacheKey(['api-key-42'])).toBe('api-key-42');
    expect(identityCacheKey(['a|1:b', 'c'])).not.toBe(identityCacheKey(['a', 'b|1:c']));
    expect(identityCacheKey(['k'.repeat(257)])).toBeUndefined();
  });

  it('looks up one call in 16 while fewer than half hit, and every call again once they would', () => {
    const cache = createIdentityCache();
    for (let i = 0; i < 100; i++) remember(cache, `steady-${i}`);
    // Mostly hits: every call is looked up.
    for (let i = 0; i < 2 * 512; i++) expect(cache.get(0, `steady-${i % 100}`)?.principal).toBe(`steady-${i % 100}`);
    expect(cache.sampling(0)).toBe(false);
    // Callers that never return: after a window of misses the cache samples.
    for (let i = 0; i < 512; i++) expect(cache.get(0, `once-${i}`)).toBeUndefined();
    expect(cache.sampling(0)).toBe(true);
    // A known caller is now answered from the cache on about one call in 16 only, drawn at random (the others hash
    // again: the same key). Binomial(1,600, 1/16): 100 on average, 61-139 within four standard deviations.
    let answered = 0;
    for (let i = 0; i < 1_600; i++) if (cache.get(0, 'steady-1') !== undefined) answered++;
    expect(answered).toBeGreaterThan(60);
    expect(answered).toBeLessThan(140);
    // Those sampled lookups all hit: the cache looks up every call again.
    for (let i = 0; i < 512 * 16; i++) cache.get(0, `steady-${i % 100}`);
    expect(cache.sampling(0)).toBe(false);
    expect(cache.get(0, 'steady-7')?.key).toBe(identity('steady-7').key);
  });

  it('while it samples, keeps only the identities of the calls it looked up', () => {
    const cache = createIdentityCache();
    for (let i = 0; i < 512; i++) expect(cache.get(0, `once-${i}`)).toBeUndefined();
    expect(cache.sampling(0)).toBe(true);
    // New callers' calls as identityOf makes them: a lookup (or none), then the offer of what it hashed.
    const call = (name: string) => {
      if (cache.get(0, name) === undefined) cache.offer(0, name, identity(name), identityHash('r', [name]));
    };
    // 16 calls each of 1,000 new callers: a caller is kept at its second looked-up call, so about 26% of them
    // (Binomial(16, 1/16) >= 2); were every call offered, all 1,000 would be (their second call).
    for (let c = 0; c < 1_000; c++) for (let i = 0; i < 16; i++) call(`new-${c}`);
    expect(cache.size).toBeGreaterThan(150);
    expect(cache.size).toBeLessThan(400);
  });

  it('decides per rule: a rule whose callers return keeps looking up beside one whose callers never do', () => {
    const cache = createIdentityCache();
    cache.offer(1, 'ip-1', identity('ip-1'), identityHash('r', ['ip-1']));
    cache.offer(1, 'ip-1', identity('ip-1'), identityHash('r', ['ip-1']));
    for (let i = 0; i < 4 * 512; i++) {
      cache.get(0, `once-${i}`);
      expect(cache.get(1, 'ip-1')).toBeDefined();
    }
    expect(cache.sampling(0)).toBe(true);
    expect(cache.sampling(1)).toBe(false);
  });
});

describe('resilient engine over the Redis engine', () => {
  it('decides the rules it matched (one match per request) with the same outcomes as the engine alone', async () => {
    const config = parseConfig({
      region: 'us-east',
      rules: [
        { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 2, period: '1m' },
        { name: 'per-ip', by: ['ip'], algorithm: 'tokenBucket', limit: 5, period: '1m' },
      ],
    });
    const inner = createRedisEngine({ config, redis, overLimitCache: false, nowMs: () => clock });
    let innerDecides = 0;
    const counted = { ...inner, decide: (r: Parameters<typeof inner.decide>[0]) => (innerDecides++, inner.decide(r)) };
    const engine = createResilientEngine({ config, inner: counted, probe: () => redis.ping(), logger: silentLogger() });
    const verdicts = [];
    for (let i = 0; i < 3; i++) verdicts.push((await engine.decide(request('resilient'))).allowed);
    expect(verdicts).toEqual([true, true, false]);
    expect(innerDecides).toBe(0);
    await engine.close();
  });
});

// A silent window's decision in scalars (lua/includes/silent_window.lua) against the general path it stands in for
// (window_rule over federated_window's view), on two real redis-servers: one runs the decide library as it ships, the
// other the same library with the silent path closed to windows. fast-check drives both with the same fixed- and
// sliding-window schedules (costs, a clock that also steps back, window edges, a shard's fence raised or its marker
// lost, a peer's cell turning the key loud), and after every decision both must give the same reply (verdict,
// remaining, reset, retry-after, false denial, quota) and hold the same keys, byte for byte. The differential test
// compares both with protocol.ts; this compares what that test does not (retry-after, the admission time written).
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { keyLayout, shardOf } from '../../src/keys.ts';
import { decideCall, decideShardKeys } from '../../src/store/decide-calls.ts';
import { decideLibrary } from '../../src/store/library.ts';
import { client, useRedis } from '../harness/redis.ts';

const layout = keyLayout();
const library = decideLibrary('decide');
const CANDIDATE = "(code == 'tb' or code == 'fw' or code == 'sw')";
if (!library.source.includes(CANDIDATE)) throw new Error('the decide library no longer names its silent candidates so');
const generalSource = library.source.replace(CANDIDATE, "code == 'tb'");
const generalFn = /^redis\.register_function\('([^']+)', decide\)$/m.exec(generalSource)![1]!;

const shipped = client((await useRedis()).url);
const general = client((await useRedis()).url);

const PERIOD = 10_000;
const KEY = 'api-key-w';
const SHARD = shardOf(KEY);

type Op =
  | { kind: 'decide'; step: number; cost: number }
  | { kind: 'edge'; delta: number }
  | { kind: 'fence' }
  | { kind: 'lose-marker' }
  | { kind: 'peer-cell'; count: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('decide' as const),
      step: fc.integer({ min: -1500, max: 4000 }),
      cost: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('edge' as const), delta: fc.integer({ min: -2, max: 2 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'fence' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'lose-marker' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('peer-cell' as const), count: fc.integer({ min: 1, max: 3 }) }) },
);

/** Every key of the server with its type and value (strings as hex; hashes, sets and sorted sets sorted). */
async function keyspace(redis: Redis): Promise<Record<string, string>> {
  const held: Record<string, string> = {};
  for (const key of (await redis.keys('*')).sort()) {
    const type = await redis.type(key);
    if (type === 'string') held[key] = `string ${(await redis.getBuffer(key))!.toString('hex')}`;
    else if (type === 'hash') held[key] = `hash ${JSON.stringify(Object.entries(await redis.hgetall(key)).sort())}`;
    else if (type === 'set') held[key] = `set ${JSON.stringify((await redis.smembers(key)).sort())}`;
    else if (type === 'zset') held[key] = `zset ${JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES'))}`;
    else held[key] = type;
  }
  return held;
}

/** The state key's TTL on both servers, read one after the other (they agree within the time between the reads). */
async function ttls(key: string): Promise<[number, number]> {
  return [await shipped.pttl(key), await general.pttl(key)];
}

describe('a silent window decided in scalars', () => {
  for (const algorithm of ['fw', 'sw'] as const) {
    it(`${algorithm}: the same replies and the same keys as the general path, step by step`, async () => {
      await shipped.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
      await general.call('FUNCTION', 'LOAD', 'REPLACE', generalSource);
      let paths = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 2, max: 12 }),
          fc.integer({ min: 0, max: 3 }),
          fc.integer({ min: 0, max: PERIOD - 1 }),
          fc.array(op, { minLength: 10, maxLength: 40 }),
          async (limit, budget, start, ops) => {
            await shipped.flushall();
            await general.flushall();
            let now = 1_800_000_000_000 + start;
            const stateKey = layout.stateKey(SHARD, 'w', KEY);
            const marker = layout.shardMarkerKey(SHARD);
            for (const redis of [shipped, general]) await redis.hset(marker, 'fence', 0);
            for (const step of ops) {
              if (step.kind === 'edge') {
                now += PERIOD - (now % PERIOD) + step.delta;
                continue;
              }
              if (step.kind === 'fence' || step.kind === 'lose-marker' || step.kind === 'peer-cell') {
                for (const redis of [shipped, general]) {
                  if (step.kind === 'fence') await redis.hset(marker, 'fence', now);
                  else if (step.kind === 'lose-marker') await redis.del(marker);
                  else {
                    // A peer's count in the current window (what apply_gossip leaves): the key is loud from then on.
                    const slot = Math.floor(now / PERIOD) % 3;
                    if ((await redis.type(stateKey)) === 'string') await redis.del(stateKey);
                    await redis.hset(stateKey, `w${slot}`, Math.floor(now / PERIOD), `c${slot}.1`, step.count);
                  }
                }
                continue;
              }
              now += step.step;
              const args = (fn: string) => [
                fn,
                ...decideCall({
                  fixedKeys: decideShardKeys(layout, SHARD, [1, 2]),
                  ruleKeys: [stateKey],
                  rules: [{ head: [algorithm, limit, PERIOD, limit], budget, leaseTtl: 30_000, shadow: 0 }],
                  topology: { selfIndex: 0, unitsCsv: '333333,333333,333333', maxClockSkewMs: 1000, horizonMs: 10_000 },
                  regions: 3,
                  cost: step.cost,
                  leaseId: '',
                  leaseAsks: [0],
                  now,
                }),
              ];
              const fast = await shipped.call('FCALL', ...args(library.fn));
              const slow = await general.call('FCALL', ...args(generalFn));
              expect(fast).toEqual(slow);
              expect(await keyspace(shipped)).toEqual(await keyspace(general));
              const [a, b] = await ttls(stateKey);
              expect(Math.abs(a - b)).toBeLessThan(200);
              paths++;
            }
          },
        ),
        { numRuns: 100 },
      );
      expect(paths).toBeGreaterThan(1000);
    });
  }
});

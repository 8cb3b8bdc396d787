// Reading a rule's state key in tests whatever its layout: a hash (windows, logs, a federated bucket), a single
// region's token bucket, one number (lua/includes/gcra.lua: the µs at which it is full again), or a silent
// federated bucket's string (lua/includes/silent_string.lua: read as the hash it stands for).
import type { Cluster, Redis } from 'ioredis';
import { expect } from 'vitest';
import { singleBucketTokens, type SingleBucketRule } from '../../src/protocol/index.ts';
import { silentStringFields } from '../../src/store/silent-string.ts';

/** The key's fields as a hash (a silent string's too); a single region's bucket as `{ fullAtUs }`; `{}` when absent. */
export async function stateFields(redis: Redis | Cluster, key: string): Promise<Record<string, string>> {
  if ((await redis.type(key)) !== 'string') return redis.hgetall(key);
  const held = (await redis.getBuffer(key))!;
  return silentStringFields(held) ?? { fullAtUs: held.toString('utf8') };
}

/** A token bucket's tokens at `now` (ms), in either layout; the capacity when the key is absent. */
export async function bucketTokens(redis: Redis | Cluster, key: string, rule: SingleBucketRule, now: number): Promise<number> {
  if ((await redis.type(key)) === 'hash') return Number(await redis.hget(key, 'tokens'));
  const held = await redis.getBuffer(key);
  const silent = held === null ? undefined : silentStringFields(held);
  if (silent) return Number(silent.tokens);
  return singleBucketTokens(rule, held === null ? undefined : Number(held.toString('utf8')), now);
}

/** Two keys of one rule decided side by side: one new (its silent string), one already a silent hash (z alone). */
export interface SilentPair {
  asString: string;
  asHash: string;
  stringKey: string;
  hashKey: string;
}

/**
 * Decides `cost` for both keys of `pair` and expects the same answer, the first key still a string, and that
 * string standing for exactly the second key's hash (lua/includes/silent_string.lua).
 */
export async function expectStringAsHash(
  redis: Redis | Cluster,
  decide: (apiKey: string, cost: number) => Promise<unknown>,
  pair: SilentPair,
  cost: number,
): Promise<void> {
  const [a, b] = [await decide(pair.asString, cost), await decide(pair.asHash, cost)];
  expect(a).toEqual(b);
  expect(await redis.type(pair.stringKey)).toBe('string');
  expect(await stateFields(redis, pair.stringKey)).toEqual(await redis.hgetall(pair.hashKey));
}

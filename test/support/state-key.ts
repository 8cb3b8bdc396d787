// Reading a rule's state key in tests whatever its layout: a hash (windows, logs, a federated bucket), a single
// region's token bucket, one number (lua/includes/gcra.lua: the µs at which it is full again), or a silent
// federated bucket's string (lua/includes/silent_string.lua: read as the hash it stands for).
import type { Cluster, Redis } from 'ioredis';
import { singleBucketTokens, type SingleBucketRule } from '../../src/protocol/index.ts';
import { silentStringFields } from '../../src/store/silent-string.ts';

/** The key's fields as a hash (a silent string's too); a single region's bucket as `{ fullAtUs }`; `{}` when absent. */
export async function stateFields(redis: Redis | Cluster, key: string): Promise<Record<string, string>> {
  if ((await redis.type(key)) !== 'string') return redis.hgetall(key);
  const held = (await redis.get(key))!;
  return silentStringFields(held) ?? { fullAtUs: held };
}

/** A token bucket's tokens at `now` (ms), in either layout; the capacity when the key is absent. */
export async function bucketTokens(redis: Redis | Cluster, key: string, rule: SingleBucketRule, now: number): Promise<number> {
  if ((await redis.type(key)) === 'hash') return Number(await redis.hget(key, 'tokens'));
  const held = await redis.get(key);
  const silent = held === null ? undefined : silentStringFields(held);
  if (silent) return Number(silent.tokens);
  return singleBucketTokens(rule, held === null ? undefined : Number(held), now);
}

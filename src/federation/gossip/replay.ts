// The replay record: which (sender, seq) pairs this region has applied, kept in the region's Redis so every
// worker instance and every restart sees it. Bounded per sender: the newest RETAINED sequence numbers are kept;
// anything at or below the oldest retained one, once the record is full, is treated as replayed (it cannot be
// told apart from one). Sequence numbers are µs-clock based (see publisher.ts), so a restarted or wiped sender
// still sends numbers above the ones recorded.
//
// Replays of genuine jobs could not change a counter anyway (merging is a max), but the record lets a replay
// be seen, counted and logged rather than silently absorbed.
import type { Redis, Cluster } from 'ioredis';
import type { KeyLayout } from '../../keys.ts';

/** Jobs remembered per sender: with one job per sync interval per peer, 20k covers ≥ 30 min at 100 ms. */
export const RETAINED = 20_000;

/** Has this region applied `seq` from `from` already? (The record lives under the region's layout, `keys`.) */
export async function alreadyApplied(redis: Redis | Cluster, keys: KeyLayout, from: string, seq: number): Promise<boolean> {
  const key = keys.replayKey(from);
  const [score, count, oldest] = await Promise.all([
    redis.zscore(key, String(seq)),
    redis.zcard(key),
    redis.zrange(key, '0', '0', 'WITHSCORES'),
  ]);
  if (score !== null) return true;
  return count >= RETAINED && oldest[1] !== undefined && seq <= Number(oldest[1]);
}

/** Recorded after the job's effects are applied, so a failed apply is retried rather than taken for a replay. */
export async function recordApplied(redis: Redis | Cluster, keys: KeyLayout, from: string, seq: number): Promise<void> {
  const key = keys.replayKey(from);
  await redis.zadd(key, String(seq), String(seq));
  await redis.zremrangebyrank(key, 0, -RETAINED - 1);
}

// One publisher per region: service instances sharing a Redis would otherwise all send the same backlog. The
// lock only saves work; two publishers at once are still correct (jobs are idempotent, acks are
// version-guarded), so a lock lost to a pause costs duplicates, never data.
import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { PUBLISHER_LOCK_KEY } from '../../keys.ts';

export { PUBLISHER_LOCK_KEY };

// Compare-and-act, so an instance never extends or deletes a lock another instance took after it expired.
const RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

export interface PublisherLock {
  readonly owner: string;
  /** Takes or renews the lock; true while this instance holds it. */
  hold(): Promise<boolean>;
  release(): Promise<void>;
}

export function createPublisherLock(redis: Redis | Cluster, ttlMs: number): PublisherLock {
  const owner = randomUUID();
  let held = false;
  return {
    owner,
    async hold() {
      if (held && Number(await redis.eval(RENEW, 1, PUBLISHER_LOCK_KEY, owner, ttlMs)) === 1) return true;
      held = (await redis.set(PUBLISHER_LOCK_KEY, owner, 'PX', ttlMs, 'NX')) === 'OK';
      return held;
    },
    async release() {
      if (!held) return;
      held = false;
      await redis.eval(RELEASE, 1, PUBLISHER_LOCK_KEY, owner);
    },
  };
}

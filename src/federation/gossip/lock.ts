// One publisher per region: service instances sharing a Redis would otherwise all send the same backlog. The
// lock only saves work; two publishers at once are still correct (jobs are idempotent, acks are
// version-guarded), so a lock lost to a pause costs duplicates, never data.
import { randomUUID } from 'node:crypto';
import { releaseLockCall, renewLockCall, runReleaseLock, runRenewLock } from '../../store/lock-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import type { KeyLayout } from '../../keys.ts';

export interface PublisherLock {
  readonly owner: string;
  /** Takes or renews the lock; true while this instance holds it. */
  hold(): Promise<boolean>;
  /**
   * Whether no other instance can hold the lock now, without asking Redis: this one took or renewed it less than two
   * thirds of its ttl ago (a third is left, for what this instance does next in Redis to land while it holds it).
   */
  surelyHeld(): boolean;
  release(): Promise<void>;
}

/**
 * The publisher lock's ttl for a sync interval: five intervals, at least 2 s (a pause of the holder shorter than that
 * keeps it).
 *
 * @example
 * publisherLockTtlMs(100); // 2000
 */
export function publisherLockTtlMs(syncIntervalMs: number): number {
  return Math.max(5 * syncIntervalMs, 2_000);
}

/**
 * How often a standby (a process of the region that does not hold the lock) runs its round: every third of the
 * lock's ttl, and never more often than the sync interval. All its round does is check the region's Redis, try the
 * lock and count the backlog now and then; a third of the ttl still takes over a lock its holder stopped renewing
 * within 4/3 of the ttl, and a standby adds about a dozen commands a second to an idle region, not thirty to
 * forty-five (test/federation/standby-rounds.test.ts).
 *
 * @example
 * standbyRoundMs(100); // 666
 */
export function standbyRoundMs(syncIntervalMs: number): number {
  return Math.max(syncIntervalMs, Math.floor(publisherLockTtlMs(syncIntervalMs) / 3));
}

// Renew and release are compare-and-act scripts (lua/renew_lock.lua, lua/release_lock.lua), so an instance
// never extends or deletes a lock another instance took after its own expired. A held lock is renewed once a
// third of its ttl has passed since it was last taken or renewed (not on every call): until then at least two
// thirds of the ttl are left, so no other instance can hold it. The lock is the layout's publisherLockKey.
export function createPublisherLock(redis: ScriptedRedis, keys: KeyLayout, ttlMs: number): PublisherLock {
  const lockKey = keys.publisherLockKey;
  const owner = randomUUID();
  let held = false;
  let heldSince = 0;
  return {
    owner,
    async hold() {
      const asked = Date.now();
      if (held && asked - heldSince < ttlMs / 3) return true;
      if (held && (await runRenewLock(redis, renewLockCall(lockKey, owner, ttlMs)))) {
        heldSince = asked;
        return true;
      }
      held = (await redis.set(lockKey, owner, 'PX', ttlMs, 'NX')) === 'OK';
      if (held) heldSince = asked;
      return held;
    },
    surelyHeld() {
      return held && Date.now() - heldSince < (2 * ttlMs) / 3;
    },
    async release() {
      if (!held) return;
      held = false;
      await runReleaseLock(redis, releaseLockCall(lockKey, owner));
    },
  };
}

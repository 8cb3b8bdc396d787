// The typed calls of renew_lock.lua and release_lock.lua: compare-and-act on a lock key, so an owner that lost
// its lock (expired, taken over) never extends or deletes another owner's.
import type { ScriptedRedis } from './commands.ts';
import { integerReply } from './replies.ts';
import { runScript, type ScriptCall } from './script-call.ts';

/** Extends a lock this owner holds: KEYS the lock; ARGV owner, ttl ms. */
export function renewLockCall(lockKey: string, owner: string, ttlMs: number): ScriptCall {
  return { keys: [lockKey], args: [owner, ttlMs] };
}

/** Whether the lock was still this owner's (and is extended). */
export async function runRenewLock(redis: ScriptedRedis, call: ScriptCall): Promise<boolean> {
  return integerReply('renew_lock', await runScript(redis, 'renewLock', call)) === 1;
}

/** Deletes a lock this owner holds: KEYS the lock; ARGV owner. */
export function releaseLockCall(lockKey: string, owner: string): ScriptCall {
  return { keys: [lockKey], args: [owner] };
}

/** Whether the lock was still this owner's (and is deleted). */
export async function runReleaseLock(redis: ScriptedRedis, call: ScriptCall): Promise<boolean> {
  return integerReply('release_lock', await runScript(redis, 'releaseLock', call)) === 1;
}

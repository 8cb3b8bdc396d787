// RDB snapshots of a lab Redis: taken mid-run (BGSAVE, as Redis's default `save` points do), loaded by the next
// start of the same redis-server (same port, same data directory), then discarded so later runs start empty.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';

/** Redis's default `dbfilename` (the lab's servers do not set one). */
export const RDB_FILE = 'dump.rdb';

/** Where a lab Redis with data directory `dir` writes and reads its snapshot. */
export function rdbPath(dir: string): string {
  return join(dir, RDB_FILE);
}

function persistenceField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(\\S+)`, 'm').exec(info)?.[1];
}

/**
 * Starts a BGSAVE and resolves when it has finished (the file is on disk); rejects when it failed or took longer
 * than `timeoutMs`. Returns the snapshot's time (Redis LASTSAVE, seconds).
 *
 * @example
 * const savedAt = await takeSnapshot(direct['eu-west']);
 */
export async function takeSnapshot(client: Redis, timeoutMs = 10_000): Promise<number> {
  const before = await client.lastsave();
  await client.bgsave();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await client.info('persistence');
    if (persistenceField(info, 'rdb_bgsave_in_progress') === '0') {
      const status = persistenceField(info, 'rdb_last_bgsave_status');
      if (status !== 'ok') throw new Error(`BGSAVE failed (rdb_last_bgsave_status: ${status ?? 'missing'})`);
      const after = await client.lastsave();
      // LASTSAVE has one-second resolution: the same second as before is fine once nothing is in progress.
      if (after >= before) return after;
    }
    if (Date.now() > deadline) throw new Error(`BGSAVE did not finish within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Removes the snapshot from a lab Redis's data directory, so the next restart comes back empty (the
 * `redis-kill` case) rather than from an old run's snapshot.
 *
 * @example
 * discardSnapshot(redisProcess.dir);
 */
export function discardSnapshot(dir: string): void {
  rmSync(rdbPath(dir), { force: true });
}

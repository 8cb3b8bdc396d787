// An in-process copy of a Redis hash that writers version with a change counter (the admin lists, the plan
// assignments): read again every `refreshMs`, with one HGET of the counter and the whole hash only when it moved;
// one read in flight at a time, a re-read after this process's own write, and one log line when reading starts
// failing and one when it works again (the last copy is kept meanwhile).
import type { Logger } from '../log.ts';
import type { RegionRedis } from '../store/client.ts';

/** The hash field writers HINCRBY on every change, so readers can tell a changed hash with one HGET. */
export const HASH_VERSION_FIELD = 'v';

export interface HashCopyOptions {
  redis: RegionRedis;
  key: string;
  /** Takes the hash as read (the counter included); runs only when the counter moved. */
  onChange: (hash: Record<string, string>) => void | Promise<void>;
  refreshMs: number;
  log: Logger;
  /** Names the log lines: `<event>.refresh_failed` / `<event>.refreshed`, "<what> not read" / "<what> read again". */
  event: string;
  what: string;
}

export interface HashCopy {
  /** Reads now, or joins the read in flight. */
  refresh(): Promise<void>;
  /** After a write: a read that began before it may miss it, so wait for that one and read again. */
  reread(): Promise<void>;
  close(): void;
}

/**
 * Starts reading at once and every `refreshMs`; the timer does not keep the process alive.
 *
 * @example
 * ```ts
 * const copy = startHashCopy({ redis, key: keys.listsKey, onChange: (hash) => { entries = parse(hash); }, refreshMs: 1_000, log, event: 'lists', what: 'admin list entries' });
 * await copy.reread(); // after a write of this process
 * copy.close();
 * ```
 */
export function startHashCopy({ redis, key, onChange, refreshMs, log, event, what }: HashCopyOptions): HashCopy {
  let version: string | null | undefined;
  let inFlight: Promise<void> | undefined;
  let failing = false;
  const read = async (): Promise<void> => {
    const seen = await redis.hget(key, HASH_VERSION_FIELD);
    if (seen === version) return;
    const hash = await redis.hgetall(key);
    await onChange(hash);
    version = hash[HASH_VERSION_FIELD] ?? null;
  };
  const refresh = (): Promise<void> => {
    inFlight ??= read().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };
  const timer = setInterval(() => {
    refresh().then(
      () => {
        if (failing) log.info({ event: `${event}.refreshed` }, `${what} read again`);
        failing = false;
      },
      (error: unknown) => {
        if (!failing)
          log.warn({ event: `${event}.refresh_failed`, error: (error as Error).message }, `${what} not read; keeping the last copy`);
        failing = true;
      },
    );
  }, refreshMs);
  timer.unref();
  void refresh().catch(() => undefined);
  return {
    refresh,
    async reread() {
      await inFlight?.catch(() => undefined);
      await refresh();
    },
    close() {
      clearInterval(timer);
    },
  };
}

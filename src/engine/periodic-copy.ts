// An in-process copy of something in Redis, read again every `refreshMs` (the admin lists, the plan
// assignments): one read in flight at a time, a re-read after this process's own write, and one log line when
// reading starts failing and one when it works again (the last copy is kept meanwhile).
import type { Logger } from '../log.ts';

export interface PeriodicCopyOptions {
  /** Reads the copy (and keeps it wherever the caller keeps it). */
  read: () => Promise<void>;
  refreshMs: number;
  log: Logger;
  /** The events and messages of the two log lines. */
  messages: { failedEvent: string; failed: string; recoveredEvent: string; recovered: string };
}

export interface PeriodicCopy {
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
 * const copy = startPeriodicCopy({ read, refreshMs: 1_000, log, messages });
 * await copy.reread(); // after a write of this process
 * copy.close();
 * ```
 */
export function startPeriodicCopy({ read, refreshMs, log, messages }: PeriodicCopyOptions): PeriodicCopy {
  let inFlight: Promise<void> | undefined;
  let failing = false;
  const refresh = (): Promise<void> => {
    inFlight ??= read().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };
  const timer = setInterval(() => {
    refresh().then(
      () => {
        if (failing) log.info({ event: messages.recoveredEvent }, messages.recovered);
        failing = false;
      },
      (error: unknown) => {
        if (!failing) log.warn({ event: messages.failedEvent, error: (error as Error).message }, messages.failed);
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

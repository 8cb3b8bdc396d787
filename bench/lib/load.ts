// Two load shapes. Closed loop: N callers, each waits for its answer before asking again (saturation).
// Open loop: requests are issued at a fixed rate whatever the answers do (a fixed offered load), so a slow
// limiter shows up as latency and a shortfall in achieved rate instead of slowing the generator down.
import { createLatencyRecorder, type LatencySummary } from './stats.ts';

export interface LoadResult {
  mode: 'closed' | 'open';
  /** Every call made, warm-up included (for per-call costs). */
  calls: number;
  concurrency?: number;
  offeredPerSec?: number;
  achievedPerSec: number;
  errors: number;
  latency: LatencySummary;
  /** Open loop only: latency counted from when the request was due (includes timer lag; no coordinated omission). */
  fromDueP99Ms?: number;
}

export type Call = (index: number) => Promise<unknown>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function closedLoop(call: Call, options: { concurrency: number; durationMs: number; warmupMs: number }): Promise<LoadResult> {
  const latency = createLatencyRecorder();
  let index = 0;
  let completed = 0;
  let errors = 0;
  const start = performance.now();
  const measureFrom = start + options.warmupMs;
  const end = measureFrom + options.durationMs;
  const worker = async () => {
    for (;;) {
      const now = performance.now();
      if (now >= end) return;
      const measuring = now >= measureFrom;
      const sent = performance.now();
      try {
        await call(index++);
      } catch {
        if (measuring) errors++;
      }
      if (measuring) {
        latency.since(sent);
        completed++;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const elapsed = Math.max(performance.now(), end) - measureFrom;
  return {
    mode: 'closed',
    calls: index,
    concurrency: options.concurrency,
    achievedPerSec: (completed * 1000) / elapsed,
    errors,
    latency: latency.summary(),
  };
}

export async function openLoop(
  call: Call,
  options: { ratePerSec: number; durationMs: number; warmupMs: number; maxInFlight?: number },
): Promise<LoadResult> {
  const latency = createLatencyRecorder();
  const fromDue = createLatencyRecorder();
  const maxInFlight = options.maxInFlight ?? 20_000;
  const total = options.warmupMs + options.durationMs;
  const perMs = options.ratePerSec / 1000;
  const t0 = performance.now();
  let issued = 0;
  let inFlight = 0;
  let completed = 0;
  let errors = 0;
  const pending = new Set<Promise<void>>();
  const issue = (dueMs: number) => {
    const measuring = dueMs >= options.warmupMs;
    const sent = performance.now();
    const due = t0 + dueMs;
    inFlight++;
    const done = call(issued++)
      .then(
        () => undefined,
        () => {
          if (measuring) errors++;
        },
      )
      .then(() => {
        inFlight--;
        if (measuring) {
          latency.since(sent);
          fromDue.since(due);
          completed++;
        }
        pending.delete(done);
      });
    pending.add(done);
  };
  for (;;) {
    const elapsed = performance.now() - t0;
    if (elapsed >= total) break;
    const due = Math.min(Math.floor(elapsed * perMs), Math.floor(total * perMs));
    while (issued < due && inFlight < maxInFlight) issue(issued / perMs);
    if (inFlight >= maxInFlight) issued = due; // shed what cannot be sent: it counts as a shortfall
    await sleep(1);
  }
  await Promise.all(pending);
  return {
    mode: 'open',
    calls: issued,
    offeredPerSec: options.ratePerSec,
    achievedPerSec: (completed * 1000) / options.durationMs,
    errors,
    latency: latency.summary(),
    fromDueP99Ms: fromDue.summary().p99Ms,
  };
}

/** Runs `count` calls with at most `concurrency` in flight; reports progress every ~2 s. */
/** Runs `call` for indexes 0..count-1 with `concurrency` callers; returns how many failed. */
export async function runCount(call: Call, count: number, concurrency: number, onProgress?: (done: number) => void): Promise<number> {
  let next = 0;
  let done = 0;
  let errors = 0;
  let lastReport = performance.now();
  const worker = async () => {
    while (next < count) {
      const index = next++;
      try {
        await call(index);
      } catch {
        errors++;
      }
      done++;
      if (onProgress && performance.now() - lastReport > 2_000) {
        lastReport = performance.now();
        onProgress(done);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return errors;
}

/** runCount for setup work that must not fail: the first error, with how many calls failed, is thrown. */
export async function runCountOrThrow(
  what: string,
  call: Call,
  count: number,
  concurrency: number,
  onProgress?: (done: number) => void,
): Promise<void> {
  let first: unknown;
  const errors = await runCount(
    (index) =>
      call(index).catch((error: unknown) => {
        first ??= error;
        throw error;
      }),
    count,
    concurrency,
    onProgress,
  );
  if (errors > 0)
    throw new Error(`${what}: ${errors} of ${count} calls failed; first: ${(first as Error)?.message ?? String(first)}`, { cause: first });
}

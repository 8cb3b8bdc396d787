// How often the fast lane may send. Each fast run that sends is a gossip job to a peer, and a job costs its
// receiver about the same whatever it carries (bench/gossip-receive.ts: a few milliseconds of CPU for one entry or
// eight), so a lane that sends one key per run whenever a bell rings pays per key. The pace is a token bucket of
// runs: a quiet lane sends at once (up to FAST_LANE_BURST runs, FAST_LANE_MS apart: one key's first admission, its
// grants back and a false denial or two go as before), and a lane kept busy by many keys sends at most
// FAST_RUNS_PER_S times a second, each run carrying every key queued meanwhile (what waits may go with the sync
// round first). When a message is sent is no part of the bound, only how soon rights move: docs/federation.md §2,
// "The fast lane's pace".

/** Fast runs a busy lane may send a second, on average (the default sync interval's rate). */
export const FAST_RUNS_PER_S = 10;
/** Fast runs a quiet lane may send back to back (each still FAST_LANE_MS after the one before). */
export const FAST_LANE_BURST = 20;

export interface FastPace {
  /** Milliseconds from `now` until a run may send (0: at once). */
  wait(now: number): number;
  /** A run sent at `now`: it spends one of the runs the pace allows. */
  spend(now: number): void;
}

/**
 * A token bucket of fast runs: `burst` runs at once, refilled at `perSecond` a second.
 *
 * @example
 * const pace = createFastPace(10, 5);
 * for (let i = 0; i < 5; i++) pace.spend(0); // a burst of five sends
 * pace.wait(0); // 100: the sixth waits for a tenth of a second
 */
export function createFastPace(perSecond: number = FAST_RUNS_PER_S, burst: number = FAST_LANE_BURST): FastPace {
  if (!(perSecond > 0) || !(burst >= 1)) throw new RangeError(`fast pace needs perSecond > 0 and burst >= 1 (got ${perSecond}, ${burst})`);
  const msPerRun = 1_000 / perSecond;
  let runs = burst;
  let at = Number.NEGATIVE_INFINITY;
  // Refilled up to `now`; a clock read earlier than the last one (another caller's, a step back) refills nothing.
  const refill = (now: number) => {
    if (now <= at) return;
    runs = at === Number.NEGATIVE_INFINITY ? burst : Math.min(burst, runs + (now - at) / msPerRun);
    at = now;
  };
  return {
    wait(now) {
      refill(now);
      return runs >= 1 ? 0 : Math.ceil((1 - runs) * msPerRun);
    },
    spend(now) {
      refill(now);
      runs -= 1;
    },
  };
}

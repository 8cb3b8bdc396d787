// A single region's token bucket in one number (state layout 2): the generic cell rate algorithm. The state is F,
// the time in µs at which the bucket holds its capacity C again (undefined: full). One token refills every
// Q = ceil(P·1000 / L) µs: the rule's rate exactly when P·1000/L is whole (1,000 per minute: 60,000 µs), else at
// most 1 µs a token slower, never faster. A request of cost c is admitted when debt + c·Q ≤ C·Q, with
// debt = max(0, F − now·1000), and moves F to max(F, now·1000) + c·Q.
//
// Every quantity is an integer below 2^53 for whole costs (µs since the epoch until the year 2255), so the Lua
// mirror stores F as a string Redis keeps as an integer (88 B a key by MEMORY USAGE) and both sides compute the
// same numbers. Lua mirror: lua/includes/gcra.lua and bucket_single.lua's gcra_decide.
//
// The bound: after any schedule, the cost admitted in any interval [s, t] is at most C + (t − s)·1000/Q ≤
// C + (t − s)·L/P (test/protocol/single-bucket.test.ts), the token bucket's own bound.

/** Q, µs per token. */
export function emissionIntervalUs(limit: number, periodMs: number): number {
  return Math.ceil((periodMs * 1000) / limit);
}

/** A single region's bucket rule: limit L per period P (ms), capacity C (the burst). */
export interface SingleBucketRule {
  limit: number;
  periodMs: number;
  burst: number;
}

/** What decideSingleBucket answers; `fullAtUs` is the state after it (unchanged by a denial). */
export interface SingleBucketDecision {
  allowed: boolean;
  /** Whole tokens left after the request. */
  remaining: number;
  /** When the bucket is full again (ms). */
  resetAt: number;
  /** When a retry may succeed, ms from now (0 when allowed). */
  retryAfter: number;
  fullAtUs: number | undefined;
}

/**
 * Decides a request of `cost` at `now` (ms) against the bucket whose state is `fullAtUs`.
 *
 * @example
 * ```ts
 * const first = decideSingleBucket({ limit: 1000, periodMs: 60_000, burst: 1000 }, undefined, now, 1);
 * first.remaining; // 999; first.fullAtUs === now * 1000 + 60_000
 * ```
 */
export function decideSingleBucket(rule: SingleBucketRule, fullAtUs: number | undefined, now: number, cost: number): SingleBucketDecision {
  const q = emissionIntervalUs(rule.limit, rule.periodMs);
  const nowUs = now * 1000;
  let debt = fullAtUs !== undefined && fullAtUs > nowUs ? fullAtUs - nowUs : 0;
  const room = rule.burst * q;
  const allowed = debt + cost * q <= room;
  if (allowed) debt = debt + cost * q;
  const remaining = Math.max(0, Math.floor((room - debt) / q));
  let resetAt = now + Math.ceil(debt / 1000);
  let retryAfter = 0;
  if (!allowed) {
    if (cost <= rule.burst) retryAfter = Math.max(1, Math.ceil((debt + cost * q - room) / 1000));
    else {
      // A cost above the capacity never fits: retry next period (as the federated bucket says).
      retryAfter = Math.max(1, (Math.floor(now / rule.periodMs) + 1) * rule.periodMs - now);
      resetAt = now + retryAfter;
    }
  }
  return { allowed, remaining, resetAt, retryAfter, fullAtUs: allowed ? nowUs + debt : fullAtUs };
}

/** The tokens `fullAtUs` stands for at `now` (C when full): what a federated reader converts it to. */
export function singleBucketTokens(rule: SingleBucketRule, fullAtUs: number | undefined, now: number): number {
  const q = emissionIntervalUs(rule.limit, rule.periodMs);
  const debt = fullAtUs === undefined ? 0 : fullAtUs - now * 1000;
  return debt <= 0 ? rule.burst : (rule.burst * q - debt) / q;
}

/**
 * Layout 1 (a hash of tokens at lastRefill, what a federated region stores) read as layout 2 at `now`: the tokens
 * refilled at L/P, the debt rounded up, so never more tokens than the hash held.
 */
export function singleBucketFromTokens(rule: SingleBucketRule, tokens: number, lastRefill: number, now: number): number | undefined {
  let held = tokens;
  if (now > lastRefill) held = held + (now - lastRefill) * (rule.limit / rule.periodMs);
  if (held >= rule.burst) return undefined;
  return now * 1000 + Math.ceil((rule.burst - held) * emissionIntervalUs(rule.limit, rule.periodMs));
}

/** refund.lua on a single region's bucket: the cost's refill time back. */
export function refundSingleBucket(rule: SingleBucketRule, fullAtUs: number | undefined, cost: number): number | undefined {
  return fullAtUs === undefined ? undefined : fullAtUs - cost * emissionIntervalUs(rule.limit, rule.periodMs);
}

// A single region's token bucket in one number (src/protocol/single-bucket.ts; Lua mirror lua/includes/gcra.lua,
// held to it by the differential test's one-region case): it never admits more than a token bucket may, it admits
// what an exact token bucket does when the rate is a whole number of µs a token, a full bucket always admits its
// capacity at once, and a layout-1 hash read into it never gains a token.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decideSingleBucket,
  emissionIntervalUs,
  refundSingleBucket,
  singleBucketFromTokens,
  singleBucketTokens,
  type SingleBucketRule,
} from '../../src/protocol/index.ts';

const T0 = 1_800_000_000_000;

const rules = fc
  .record({
    limit: fc.integer({ min: 1, max: 100_000 }),
    periodMs: fc.integer({ min: 1, max: 3_600_000 }),
    burst: fc.option(fc.integer({ min: 1, max: 100_000 }), { nil: undefined }),
  })
  .filter(({ limit, periodMs }) => periodMs * 1000 >= limit)
  .map(({ limit, periodMs, burst }): SingleBucketRule => ({ limit, periodMs, burst: burst ?? limit }));

/** Requests: the ms since the one before (0 = the same instant) and the cost. */
const schedules = (rule: SingleBucketRule) =>
  fc.array(
    fc.record({
      gap: fc.oneof(
        fc.constant(0),
        fc.integer({ min: 0, max: Math.max(1, Math.ceil(rule.periodMs / rule.limit) * 3) }),
        fc.integer({ min: 0, max: rule.periodMs }),
      ),
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 0, max: Math.min(rule.burst + 1, 50) })),
    }),
    { minLength: 1, maxLength: 200 },
  );

function run(rule: SingleBucketRule, schedule: { gap: number; cost: number }[]) {
  let now = T0;
  let fullAt: number | undefined;
  return schedule.map(({ gap, cost }) => {
    now += gap;
    const decision = decideSingleBucket(rule, fullAt, now, cost);
    fullAt = decision.fullAtUs;
    return { now, cost, decision };
  });
}

describe('a single region token bucket in one number', () => {
  it('never admits more in any interval [s, t] than C + (t - s)·L/P', () => {
    fc.assert(
      fc.property(
        rules.chain((rule) => fc.tuple(fc.constant(rule), schedules(rule))),
        ([rule, schedule]) => {
          const steps = run(rule, schedule);
          for (let i = 0; i < steps.length; i++) {
            let admitted = 0;
            for (let j = i; j < steps.length; j++) {
              if (steps[j]!.decision.allowed) admitted += steps[j]!.cost;
              const bound = rule.burst + ((steps[j]!.now - steps[i]!.now) * rule.limit) / rule.periodMs;
              expect(admitted).toBeLessThanOrEqual(bound + 1e-9);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('decides as an exact token bucket when a token takes a whole number of µs', () => {
    fc.assert(
      fc.property(
        rules
          .filter(({ limit, periodMs }) => (periodMs * 1000) % limit === 0)
          .chain((rule) => fc.tuple(fc.constant(rule), schedules(rule))),
        ([rule, schedule]) => {
          // The exact bucket in integers: tokens × P × 1000, refilled by L per µs.
          const scale = BigInt(rule.periodMs) * 1000n;
          const cap = BigInt(rule.burst) * scale;
          let held = cap;
          let last = T0;
          for (const { now, cost, decision } of run(rule, schedule)) {
            held += BigInt(now - last) * 1000n * BigInt(rule.limit);
            if (held > cap) held = cap;
            last = now;
            const allowed = held >= BigInt(cost) * scale;
            if (allowed) held -= BigInt(cost) * scale;
            expect(decision.allowed).toBe(allowed);
            expect(decision.remaining).toBe(Number(held / scale));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('admits a full bucket of C at one instant, whatever the rate', () => {
    fc.assert(
      fc.property(rules, (rule) => {
        const burst = Math.min(rule.burst, 300);
        const bucket = { ...rule, burst };
        let fullAt: number | undefined;
        for (let i = 0; i < burst; i++) {
          const decision = decideSingleBucket(bucket, fullAt, T0, 1);
          expect(decision.allowed).toBe(true);
          expect(decision.remaining).toBe(burst - i - 1);
          fullAt = decision.fullAtUs;
        }
        const denied = decideSingleBucket(bucket, fullAt, T0, 1);
        expect(denied.allowed).toBe(false);
        // The retry it names succeeds, and a millisecond earlier would not.
        expect(decideSingleBucket(bucket, fullAt, T0 + denied.retryAfter, 1).allowed).toBe(true);
        if (denied.retryAfter > 1) expect(decideSingleBucket(bucket, fullAt, T0 + denied.retryAfter - 1, 1).allowed).toBe(false);
        // A refund gives the cost's refill time back.
        expect(singleBucketTokens(bucket, refundSingleBucket(bucket, fullAt, 1), T0)).toBe(1);
      }),
      { numRuns: 200 },
    );
  });

  it('reads a layout-1 hash as at most the tokens it held, less than one µs of refill below them', () => {
    fc.assert(
      fc.property(rules, fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 0, max: 100_000 }), (rule, fraction, elapsed) => {
        const tokens = fraction * rule.burst;
        const fullAt = singleBucketFromTokens(rule, tokens, T0, T0 + elapsed);
        const refilled = Math.min(rule.burst, tokens + (elapsed * rule.limit) / rule.periodMs);
        const read = singleBucketTokens(rule, fullAt, T0 + elapsed);
        expect(read).toBeLessThanOrEqual(refilled + 1e-9);
        expect(refilled - read).toBeLessThanOrEqual(1 / emissionIntervalUs(rule.limit, rule.periodMs) + 1e-9);
      }),
      { numRuns: 500 },
    );
  });
});

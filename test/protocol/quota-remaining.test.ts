// The federation's remaining quota as a region's view has it (windowQuotaRemaining, bucketQuotaRemaining): what
// one exact global limiter would say for the view's counts, never below what the region itself can admit, 0 in
// a forfeited window, the region's own count in a bucket's zero-share span and on one region.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  bucketQuotaRemaining,
  decideBucket,
  decideWindow,
  emptyEpochSlot,
  emptyWindowSlot,
  federationParams,
  newBucket,
  newWindowState,
  windowIdAt,
  windowQuotaRemaining,
  type BucketState,
  type FederationParams,
  type WindowState,
} from '../../src/protocol/index.ts';

const PERIOD = 60_000;
// 40 s into a window, so a token bucket's epoch has refilled a while.
const NOW = 1_800_000_000_000 - (1_800_000_000_000 % PERIOD) + 40_000;
const ID = windowIdAt(NOW, PERIOD);

function params(overrides: Partial<Parameters<typeof federationParams>[0]> = {}): FederationParams {
  return federationParams({
    regions: 3,
    self: 1,
    weights: [1, 1, 1],
    limit: 1_000,
    periodMs: PERIOD,
    leakageBudget: '5%',
    maxClockSkewMs: 1_000,
    ...overrides,
  });
}

/** A window state in which region `peer` admitted `count` in the current window (as a merge would leave it). */
function windowSeen(p: FederationParams, peer: number, count: number): WindowState {
  const state = newWindowState(p.regions);
  const slot = emptyWindowSlot(p.regions, ID);
  slot.c[peer] = count;
  state.slots[ID % 3] = slot;
  return state;
}

/** A fresh bucket in which region `peer` admitted `count` in the current epoch. */
function bucketSeen(p: FederationParams, peer: number, count: number): BucketState {
  const bucket = newBucket(p, 0, NOW);
  const slot = emptyEpochSlot(p.regions, ID);
  slot.c[peer] = count;
  bucket.slots[ID % 3] = slot;
  return bucket;
}

describe('windows: the federation remaining quota', () => {
  for (const sliding of [false, true]) {
    const name = sliding ? 'slidingWindow' : 'fixedWindow';
    it(`${name}: a fresh key answers 999 of 1,000 after one admission in a three-region view`, () => {
      const verdict = decideWindow(params(), newWindowState(3), 0, NOW, 1, sliding);
      expect(verdict.allowed).toBe(true);
      expect(verdict.quotaRemaining).toBe(999);
      // The region's own allowance is about a third (the limit plus the budget, split three ways).
      expect(verdict.remaining).toBe(349);
    });

    it(`${name}: after a peer's 600 are seen, 399`, () => {
      const verdict = decideWindow(params(), windowSeen(params(), 0, 600), 0, NOW, 1, sliding);
      expect(verdict).toMatchObject({ allowed: true, quotaRemaining: 399 });
    });

    it(`${name}: a denial takes nothing off`, () => {
      const p = params();
      const state = windowSeen(p, 0, 600);
      state.slots[ID % 3]!.c[1] = 349;
      state.slots[ID % 3]!.a[1] = [600, 349, 0];
      const verdict = decideWindow(p, state, 0, NOW, 2, sliding);
      expect(verdict).toMatchObject({ allowed: false, falseDenial: true, remaining: 1, quotaRemaining: 51 });
    });

    it(`${name}: a forfeited window answers 0`, () => {
      const verdict = decideWindow(params(), newWindowState(3), NOW - 1_000, NOW, 1, sliding);
      expect(verdict).toMatchObject({ allowed: false, remaining: 0, quotaRemaining: 0 });
    });

    it(`${name}: one region answers its remaining`, () => {
      const single = params({ regions: 1, self: 0, weights: [1] });
      let state = newWindowState(1);
      for (let i = 0; i < 5; i++) {
        const verdict = decideWindow(single, state, 0, NOW, 250, sliding);
        expect(verdict.quotaRemaining).toBe(verdict.remaining);
        state = verdict.state;
      }
    });
  }

  it('is L − G after the request for any view, never below the region own remaining', () => {
    const count = fc.integer({ min: 0, max: 600 });
    fc.assert(
      fc.property(
        fc.tuple(count, count, count),
        fc.integer({ min: 1, max: 5 }),
        fc.boolean(),
        fc.integer({ min: 0, max: PERIOD - 1 }),
        (counts, cost, sliding, into) => {
          const p = params();
          const now = ID * PERIOD + into;
          const state = newWindowState(3);
          const slot = emptyWindowSlot(3, ID);
          slot.c = [...counts];
          state.slots[ID % 3] = slot;
          const verdict = decideWindow(p, state, 0, now, cost, sliding);
          expect(verdict.quotaRemaining).toBeGreaterThanOrEqual(verdict.remaining);
          expect(verdict.quotaRemaining).toBeGreaterThanOrEqual(0);
          const used = counts[0] + counts[1] + counts[2] + (verdict.allowed ? cost : 0);
          // No previous window here, so the sliding estimate is the fixed one.
          expect(verdict.quotaRemaining).toBe(Math.max(verdict.remaining, p.limit - used, 0));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('windowQuotaRemaining: the definition', () => {
    expect(windowQuotaRemaining(999, 348, 1, false)).toBe(998);
    expect(windowQuotaRemaining(-3, 0, 0, false)).toBe(0);
    expect(windowQuotaRemaining(2, 5, 0, false)).toBe(5);
    expect(windowQuotaRemaining(500, 100, 0, true)).toBe(0);
  });
});

describe('token bucket: the federation remaining quota', () => {
  it('a fresh key answers 999 of 1,000 after one admission in a three-region view', () => {
    const verdict = decideBucket(params(), undefined, 0, NOW, 1);
    expect(verdict.allowed).toBe(true);
    expect(verdict.quotaRemaining).toBe(999);
    // The region's own tokens: a third of the capacity plus its part of the budget (333.33 + 16), less one.
    expect(Math.floor(verdict.remaining)).toBe(348);
  });

  it("after a peer's 600 are seen, 399", () => {
    const verdict = decideBucket(params(), bucketSeen(params(), 0, 600), 0, NOW, 1);
    expect(verdict).toMatchObject({ allowed: true, quotaRemaining: 399 });
  });

  it("counts the previous epoch's use and the refill since the epoch began", () => {
    const p = params();
    const bucket = newBucket(p, 0, NOW);
    const previous = emptyEpochSlot(3, ID - 1);
    previous.c = [300, 500, 100];
    bucket.slots[(ID - 1) % 3] = previous;
    // carried = 1,000 − 900 = 100, plus 40 s of 1,000 per minute = 666.67: 766 held, 765 after the request.
    expect(decideBucket(p, bucket, 0, NOW, 1).quotaRemaining).toBe(765);
  });

  it("answers the region's own tokens in the fence's zero-share span, and on one region", () => {
    const p = params();
    const fenced = decideBucket(p, undefined, NOW - 1_000, NOW, 1);
    expect(fenced.quotaRemaining).toBe(Math.max(0, Math.floor(fenced.remaining)));
    const single = params({ regions: 1, self: 0, weights: [1] });
    let state: BucketState | undefined;
    for (let i = 0; i < 5; i++) {
      const verdict = decideBucket(single, state, 0, NOW + i * 1_000, 300);
      expect(verdict.quotaRemaining).toBe(Math.max(0, Math.floor(verdict.remaining)));
      state = verdict.state;
    }
  });

  it("is never below the region's own tokens, and at most the capacity unless those are more", () => {
    const count = fc.integer({ min: 0, max: 800 });
    fc.assert(
      fc.property(
        fc.tuple(count, count, count),
        fc.tuple(count, count, count),
        fc.integer({ min: 0, max: 400 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: PERIOD - 1 }),
        (current, previous, tokens, cost, into) => {
          const p = params({ burst: 600 });
          const now = ID * PERIOD + into;
          const bucket = newBucket(p, 0, now);
          bucket.tokens = tokens;
          const slot = emptyEpochSlot(3, ID);
          slot.c = [...current];
          const before = emptyEpochSlot(3, ID - 1);
          before.c = [...previous];
          bucket.slots[ID % 3] = slot;
          bucket.slots[(ID - 1) % 3] = before;
          const verdict = decideBucket(p, bucket, 0, now, cost);
          const own = Math.max(0, Math.floor(verdict.remaining));
          expect(verdict.quotaRemaining).toBeGreaterThanOrEqual(own);
          expect(verdict.quotaRemaining).toBeLessThanOrEqual(Math.max(p.capacity, own));
          expect(verdict.quotaRemaining).toBe(bucketQuotaRemaining(p, bucket, 0, now, verdict.remaining, verdict.allowed ? cost : 0));
        },
      ),
      { numRuns: 500 },
    );
  });
});

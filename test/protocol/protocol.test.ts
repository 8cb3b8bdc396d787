// The protocol's pure functions: the merge is a join, a denial changes nothing, transfers only move unused
// allowance, and the static arithmetic never hands out more than the limit plus the budget.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  SHARE_UNITS,
  bucketCapacity,
  bucketHasHungryPeer,
  bucketSweepIdle,
  bucketSweepIdleUntil,
  decideBucket,
  decideWindow,
  emptyEpochSlot,
  emptyWindowSlot,
  federationParams,
  joinEpochSlots,
  joinWindowSlots,
  mergeBucket,
  mergeWindow,
  newBucket,
  newWindowState,
  rebalanceBucket,
  sweepBucket,
  sweepWindow,
  rebalanceWindow,
  portion,
  refill,
  resolveLeakageBudget,
  shareAt,
  shareUnits,
  windowAllowance,
  windowBase,
  windowCells,
  windowForfeited,
  type BucketState,
  type EpochSlot,
  type FederationParams,
  type WindowSlot,
  type WindowState,
} from '../../src/protocol/index.ts';
import { quiet, stopped } from '../../src/protocol/demand.ts';

const N = 3;
const cell = fc.integer({ min: 0, max: 40 });
const row = fc.array(cell, { minLength: N, maxLength: N });
const square = fc.array(row, { minLength: N, maxLength: N });

const times = fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: N, maxLength: N });
const windowSlot = (id: number): fc.Arbitrary<WindowSlot> => fc.record({ id: fc.constant(id), c: row, x: square, a: square, t: times });
const epochSlot = (id: number): fc.Arbitrary<EpochSlot> => fc.record({ id: fc.constant(id), c: row, x: square, y: square, t: times });

function params(overrides: Partial<Parameters<typeof federationParams>[0]> = {}): FederationParams {
  return federationParams({
    regions: N,
    self: 1,
    weights: [1, 2, 1],
    limit: 100,
    periodMs: 1_000,
    leakageBudget: 10,
    maxClockSkewMs: 100,
    ...overrides,
  });
}

describe('static arithmetic', () => {
  it('share units never add up to more than S, and floor(L·u/S) sums stay within L', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.001, max: 1000, noNaN: true }), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 1_000_000_000 }),
        (weights, limit) => {
          const units = shareUnits(weights);
          expect(units.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(SHARE_UNITS);
          expect(units.every((u) => Number.isInteger(u) && u >= 0)).toBe(true);
          expect(units.reduce((total, u) => total + portion(limit, u), 0)).toBeLessThanOrEqual(limit);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('resolves budgets: counts, percentages, unbounded, and exactness for a single region', () => {
    expect(resolveLeakageBudget(1000, '5%', 3)).toBe(50);
    expect(resolveLeakageBudget(1000, 7, 3)).toBe(7);
    expect(resolveLeakageBudget(1000, 'unbounded', 3)).toBeNull();
    expect(resolveLeakageBudget(1000, 'unbounded', 1)).toBe(0);
    expect(resolveLeakageBudget(1000, 50, 1)).toBe(0);
    const single = federationParams({
      regions: 1,
      self: 0,
      weights: [3],
      limit: 7,
      periodMs: 1000,
      leakageBudget: '50%',
      maxClockSkewMs: 0,
    });
    expect(windowBase(single, 0)).toBe(7);
  });

  it('window bases add up to exactly L + B in every window (the floor remainder rotates with the window id)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 2, maxLength: 6 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 0, max: 5_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (weights, limit, budget, id) => {
          const p = federationParams({
            regions: weights.length,
            self: 0,
            weights,
            limit,
            periodMs: 1000,
            leakageBudget: budget,
            maxClockSkewMs: 0,
          });
          let total = 0;
          for (let d = 0; d < weights.length; d++) total += windowBase(p, d, id);
          expect(total).toBe(limit + budget);
        },
      ),
      { numRuns: 500 },
    );
    // /checkout: 10 per minute over three regions, budget 0 → 4 + 3 + 3, the 4 rotating.
    const checkout = (self: number) =>
      federationParams({ regions: 3, self, weights: [1, 1, 1], limit: 10, periodMs: 60_000, leakageBudget: '5%', maxClockSkewMs: 0 });
    expect([0, 1, 2].map((d) => windowBase(checkout(0), d, 0))).toEqual([4, 3, 3]);
    expect([0, 1, 2].map((d) => windowBase(checkout(0), d, 1))).toEqual([3, 4, 3]);
  });

  it('window bases are house-monotone: a larger L + B never gives a region less in the same window (issue 21)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 2, maxLength: 6 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (weights, limit, raise, id) => {
          const at = (l: number) =>
            federationParams({ regions: weights.length, self: 0, weights, limit: l, periodMs: 1000, leakageBudget: 0, maxClockSkewMs: 0 });
          for (let d = 0; d < weights.length; d++)
            expect(windowBase(at(limit + raise), d, id)).toBeGreaterThanOrEqual(windowBase(at(limit), d, id));
        },
      ),
      { numRuns: 500 },
    );
    // The worked case: weights 1, 2, 3, L 3 → 4, B = 0. The largest-remainder split gave 1, 0, 2 and then
    // 0, 1, 3 in every third window (ap's admitted 1 stayed counted beside 1 + 3: 5 > 4); now no base shrinks.
    const at = (limit: number) =>
      federationParams({ regions: 3, self: 0, weights: [1, 2, 3], limit, periodMs: 1000, leakageBudget: 0, maxClockSkewMs: 0 });
    for (let id = 0; id < 3; id++) {
      const before = [0, 1, 2].map((d) => windowBase(at(3), d, id));
      const after = [0, 1, 2].map((d) => windowBase(at(4), d, id));
      expect(before.reduce((a, b) => a + b)).toBe(3);
      expect(after.reduce((a, b) => a + b)).toBe(4);
      after.forEach((base, d) => expect(base).toBeGreaterThanOrEqual(before[d]!));
    }
  });

  it('a single region is an exact fixed window', () => {
    const single = federationParams({ regions: 1, self: 0, weights: [1], limit: 5, periodMs: 1000, leakageBudget: 3, maxClockSkewMs: 0 });
    let state = newWindowState(1);
    const outcomes: boolean[] = [];
    for (let i = 0; i < 7; i++) {
      const decision = decideWindow(single, state, 0, 10 + i, 1, false);
      outcomes.push(decision.allowed);
      state = decision.state;
    }
    expect(outcomes).toEqual([true, true, true, true, true, false, false]);
    expect(decideWindow(single, state, 0, 1000, 1, false).allowed).toBe(true);
  });
});

describe('merge is a join', () => {
  it('window slots: idempotent, commutative, associative', () => {
    fc.assert(
      fc.property(windowSlot(4), windowSlot(4), windowSlot(4), (a, b, c) => {
        expect(joinWindowSlots(a, a)).toEqual(a);
        expect(joinWindowSlots(a, b)).toEqual(joinWindowSlots(b, a));
        expect(joinWindowSlots(joinWindowSlots(a, b), c)).toEqual(joinWindowSlots(a, joinWindowSlots(b, c)));
      }),
      { numRuns: 300 },
    );
  });

  it('epoch slots: idempotent, commutative, associative', () => {
    fc.assert(
      fc.property(epochSlot(4), epochSlot(4), epochSlot(4), (a, b, c) => {
        expect(joinEpochSlots(a, a)).toEqual(a);
        expect(joinEpochSlots(a, b)).toEqual(joinEpochSlots(b, a));
        expect(joinEpochSlots(joinEpochSlots(a, b), c)).toEqual(joinEpochSlots(a, joinEpochSlots(b, c)));
      }),
      { numRuns: 300 },
    );
  });

  it('applying the same gossip twice changes nothing the second time (duplicates are harmless)', () => {
    const p = params();
    fc.assert(
      fc.property(fc.array(windowSlot(4), { minLength: 1, maxLength: 3 }), (views) => {
        let state = newWindowState(N);
        for (const view of views) state = mergeWindow(p, state, 0, 4_500, [view]).state;
        const again = mergeWindow(p, state, 0, 4_500, [views[views.length - 1]!]);
        expect(again.changed).toBe(false);
        expect(again.state).toBe(state);
      }),
      { numRuns: 300 },
    );
  });

  it('the view part of a merge does not depend on the order of the messages', () => {
    // No rebalance can fire: the region is unbounded... so compare the joined views only.
    const p = params({ leakageBudget: 'unbounded' });
    fc.assert(
      fc.property(windowSlot(4), windowSlot(4), windowSlot(4), (a, b, c) => {
        const apply = (order: WindowSlot[]): WindowState =>
          order.reduce((state, slot) => mergeWindow(p, state, 0, 4_500, [slot]).state, newWindowState(N));
        const one = windowCells(apply([a, b, c]), 4);
        const two = windowCells(apply([c, a, b]), 4);
        expect(one).toEqual(two);
      }),
      { numRuns: 300 },
    );
  });
});

// A random history at region `self`: its own admissions, and gossip claiming anything at all about peers
// (and, after a wipe, about itself).
type Op =
  | { kind: 'admit'; dt: number; cost: number }
  | { kind: 'merge'; dt: number; window: number; slot: { c: number[]; x: number[][]; a: number[][]; t: number[] } };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('admit' as const),
      dt: fc.integer({ min: 0, max: 300 }),
      cost: fc.integer({ min: 1, max: 8 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('merge' as const),
      dt: fc.integer({ min: 0, max: 300 }),
      window: fc.integer({ min: -2, max: 2 }),
      slot: fc.record({ c: row, x: square, a: square, t: times }),
    }),
  },
);

const paramsArb = fc.record({
  weights: fc.array(fc.integer({ min: 1, max: 5 }), { minLength: N, maxLength: N }),
  limit: fc.integer({ min: 1, max: 120 }),
  budget: fc.integer({ min: 0, max: 30 }),
  self: fc.integer({ min: 0, max: N - 1 }),
  skew: fc.integer({ min: 0, max: 400 }),
  fence: fc.constantFrom(0, 0, 1_700, 2_000),
});

function buildParams(input: { weights: number[]; limit: number; budget: number; self: number; skew: number }): FederationParams {
  return federationParams({
    regions: N,
    self: input.self,
    weights: input.weights,
    limit: input.limit,
    periodMs: 1_000,
    leakageBudget: input.budget,
    maxClockSkewMs: input.skew,
  });
}

describe('windows: region-local invariants under any history', () => {
  it("own rows never shrink and a denial changes nothing but a false denial's own t, whatever gossip arrives", () => {
    fc.assert(
      fc.property(paramsArb, fc.array(op, { minLength: 1, maxLength: 40 }), fc.boolean(), (input, ops, sliding) => {
        const p = buildParams(input);
        const r = p.self;
        let state = newWindowState(N);
        let now = 1_000;
        for (const step of ops) {
          now += step.dt;
          const before = structuredClone(state);
          if (step.kind === 'admit') {
            const decision = decideWindow(p, state, input.fence, now, step.cost, sliding);
            // A window that started at or before the recovery fence admits nothing.
            if (windowForfeited(p, input.fence, Math.floor(now / 1_000))) expect(decision.allowed).toBe(false);
            if (!decision.allowed && !decision.falseDenial) {
              expect(decision.state).toBe(state);
              expect(state).toEqual(before);
            }
            if (decision.falseDenial) {
              // Demand: only this region's t in the current window moves, to now.
              expect(state).toEqual(before);
              const id = Math.floor(now / 1_000);
              const touched = structuredClone(decision.state);
              const cells = touched.slots.find((slot) => slot.id === id)!;
              expect(cells.t[r]).toBe(Math.max(windowCells(before, id).t[r]!, now));
              cells.t[r] = windowCells(before, id).t[r]!;
              if (before.slots.some((slot) => slot.id === id)) expect(touched).toEqual(before);
            }
            state = decision.state;
          } else {
            const id = Math.floor(now / 1_000) + step.window;
            state = mergeWindow(p, state, input.fence, now, [{ id, ...step.slot }]).state;
          }
          for (const slot of state.slots) {
            if (slot.id < 0) continue;
            const old = before.slots.find((s) => s.id === slot.id);
            if (old) {
              // Own row is a G-counter.
              expect(slot.c[r]).toBeGreaterThanOrEqual(old.c[r]!);
              slot.x[r]!.forEach((value, d) => expect(value).toBeGreaterThanOrEqual(old.x[r]![d]!));
            }
          }
        }
      }),
      { numRuns: 600 },
    );
  });
});

describe('windows: invariants with honest peers', () => {
  it('c[r] ≤ l_r after every admission and every rebalance, whatever peers report about themselves', () => {
    fc.assert(
      fc.property(paramsArb, fc.array(op, { minLength: 1, maxLength: 40 }), (input, ops) => {
        const p = buildParams(input);
        const r = p.self;
        let state = newWindowState(N);
        let now = 1_000;
        for (const step of ops) {
          now += step.dt;
          if (step.kind === 'admit') {
            state = decideWindow(p, state, 0, now, step.cost, false).state;
          } else {
            // Peers only speak for their own rows and their acknowledgements; r's row comes back as r sent it.
            const id = Math.floor(now / 1_000) + step.window;
            const own = windowCells(state, id);
            const slot = emptyWindowSlot(N, id);
            for (let o = 0; o < N; o++) {
              slot.c[o] = o === r ? own.c[r]! : step.slot.c[o]!;
              slot.x[o] = o === r ? [...own.x[r]!] : [...step.slot.x[o]!];
              slot.a[o] = [...step.slot.a[o]!];
              slot.t[o] = o === r ? own.t[r]! : now - step.slot.t[o]! / 2;
            }
            state = mergeWindow(p, state, 0, now, [slot]).state;
          }
          for (const slot of state.slots) {
            if (slot.id >= 0) expect(slot.c[r]!).toBeLessThanOrEqual(windowAllowance(p, slot, r));
          }
        }
      }),
      { numRuns: 800 },
    );
  });
});

describe('token bucket: region-local invariants', () => {
  it('σ_r stays ≥ 0 at every later instant, tokens ≤ cap, own rows never shrink, denials change nothing but t', () => {
    fc.assert(
      fc.property(paramsArb, fc.array(op, { minLength: 1, maxLength: 40 }), (input, ops) => {
        const p = buildParams(input);
        const r = p.self;
        let state: BucketState | undefined;
        let now = 2_500;
        for (const step of ops) {
          now += step.dt;
          if (step.kind === 'admit') {
            const before = structuredClone(state);
            const decision = decideBucket(p, state, input.fence, now, step.cost);
            if (!decision.allowed && !decision.falseDenial) {
              expect(decision.state).toBe(state);
              expect(state).toEqual(before);
            }
            if (decision.falseDenial && state !== undefined) {
              // Demand: this region's t in the current epoch moves, to now, after the bucket is refilled to now;
              // nothing is counted, and the touch gives no tokens later (the past is not integrated again at
              // another share once the epoch's slot replaced an older one).
              expect(state).toEqual(before);
              const id = Math.floor(now / 1_000);
              const touched = structuredClone(decision.state)!;
              expect(touched.tokens).toBe(refill(p, state, input.fence, now));
              expect(touched.lastRefill).toBe(now);
              for (const later of [now + 1, now + 250, now + 999])
                expect(refill(p, touched, input.fence, later)).toBeLessThanOrEqual(refill(p, state, input.fence, later) + 1e-6);
              const cells = touched.slots.find((slot) => slot.id === id)!;
              expect(cells.t[r]).toBeGreaterThanOrEqual(now);
              expect(cells.c[r]).toBe(state.slots.find((slot) => slot.id === id)?.c[r] ?? 0);
            }
            state = decision.state;
          } else {
            const id = Math.floor(now / 1_000) + step.window;
            const held = state ? state.slots.find((s) => s.id === id) : undefined;
            const slot = emptyEpochSlot(N, id);
            for (let o = 0; o < N; o++) {
              slot.c[o] = o === r ? (held?.c[r] ?? 0) : step.slot.c[o]!;
              // Peers' transfers in share units: scale the small generated numbers up.
              slot.x[o] = o === r ? [...(held?.x[r] ?? new Array(N).fill(0))] : step.slot.x[o]!.map((v) => v * 5_000);
              slot.y[o] = o === r ? [...(held?.y[r] ?? new Array(N).fill(0))] : step.slot.a[o]!.map((v) => v / 3);
              slot.t[o] = o === r ? (held?.t[r] ?? 0) : now - step.slot.t[o]! / 2;
            }
            const before = state;
            state = mergeBucket(p, state, input.fence, now, [slot]).state;
            for (const after of state?.slots ?? []) {
              const old = before?.slots.find((s) => s.id === after.id);
              if (!old) continue;
              after.x[r]!.forEach((value, d) => expect(value).toBeGreaterThanOrEqual(old.x[r]![d]!));
              after.y[r]!.forEach((value, d) => expect(value).toBeGreaterThanOrEqual(old.y[r]![d]!));
            }
          }
          if (!state) continue;
          const tokens = refill(p, state, input.fence, now);
          expect(tokens).toBeLessThanOrEqual(bucketCapacity(p, shareAt(p, state.slots, input.fence, now)) + 1e-9);
          let lowest = Infinity;
          for (let later = now; later < now + 2_500; later += 37) {
            lowest = Math.min(lowest, shareAt(p, state.slots, input.fence, later));
          }
          if (lowest < 0) throw new Error(`share ${lowest} < 0`);
        }
      }),
      { numRuns: 600 },
    );
  });

  it('refill integrates the exact share path: never more than cap, and exact for a constant share', () => {
    const p = params();
    const bucket = newBucket(p, 0, 5_000);
    const drained: BucketState = { ...bucket, tokens: 0 };
    const full = bucketCapacity(p, p.units[1]!);
    expect(refill(p, drained, 0, 5_100)).toBeCloseTo((100 * 100 * p.units[1]!) / (1_000 * SHARE_UNITS), 9);
    expect(refill(p, drained, 0, 500_000)).toBeCloseTo(full, 9);
  });

  it('after a data loss a new bucket starts empty at the fence and holds no share for the rest of that epoch plus the skew', () => {
    const p = params();
    const fence = 5_300;
    const early = newBucket(p, fence, 6_050);
    expect(early.tokens).toBe(0);
    expect(shareAt(p, early.slots, fence, 6_050)).toBe(0);
    const later = newBucket(p, fence, 6_150);
    expect(shareAt(p, later.slots, fence, 6_150)).toBe(p.units[1]);
    expect(later.tokens).toBeCloseTo((50 * 100 * p.units[1]!) / (1_000 * SHARE_UNITS), 9);
  });
});

describe('edges of the recovery fence and of time', () => {
  it('a window that starts exactly at the fence is forfeited too (the region may have acted in that ms)', () => {
    const p = params();
    expect(windowForfeited(p, 2_000, 2)).toBe(true);
    expect(windowForfeited(p, 2_999, 2)).toBe(true);
    expect(windowForfeited(p, 2_999, 3)).toBe(false);
    expect(windowForfeited(p, 0, 0)).toBe(false);
  });

  it('never gives in a window that has not started on its own clock (a wipe before it starts would forget the gift)', () => {
    const p = params(); // self = 1
    const now = 5_900; // window 5; a peer ahead already reports window 6
    const hungryPeer = emptyWindowSlot(N, 6);
    hungryPeer.c[0] = 30;
    hungryPeer.t[0] = now - 10;
    const ahead = mergeWindow(p, newWindowState(N), 0, now, [hungryPeer]);
    expect(ahead.changed).toBe(true);
    expect(windowCells(ahead.state, 6).x[1]).toEqual([0, 0, 0]);
    // The same report for the current window does trigger a transfer.
    const current = mergeWindow(p, newWindowState(N), 0, now, [{ ...hungryPeer, id: 5 }]);
    expect(windowCells(current.state, 5).x[1]![0]).toBeGreaterThan(0);
    expect(windowCells(current.state, 5).c[1]).toBeLessThanOrEqual(windowAllowance(p, windowCells(current.state, 5), 1));
  });

  it('gives nothing in a forfeited window and keeps no window outside [cur−1, cur+1]', () => {
    const p = params();
    const hungryPeer = emptyWindowSlot(N, 5);
    hungryPeer.c[0] = 30;
    hungryPeer.t[0] = 5_800;
    const fenced = mergeWindow(p, newWindowState(N), 5_100, 5_900, [hungryPeer]);
    expect(windowCells(fenced.state, 5).x[1]).toEqual([0, 0, 0]);
    const stale = mergeWindow(p, newWindowState(N), 0, 5_900, [
      { ...hungryPeer, id: 3 },
      { ...hungryPeer, id: 7 },
    ]);
    expect(stale.changed).toBe(false);
  });
});

describe('rights that move on demand', () => {
  it('a free donor (idle in w and w−1) gives all but one request to an active peer at once', () => {
    const p = params(); // self = 1, base 55 in window 5 (110 over weights 1:2:1)
    const view = emptyWindowSlot(N, 5);
    view.c[0] = 1;
    view.t[0] = 5_010;
    const state = mergeWindow(p, newWindowState(N), 0, 5_020, [view]).state;
    // (The window's last tenth starts at 5_900.)
    const cells = windowCells(state, 5);
    expect(cells.x[1]![0]).toBe(windowBase(p, 1, 5) - 1);
    expect(windowAllowance(p, cells, 1)).toBe(1);
    // In the last tenth of the window it keeps nothing.
    const late = federationParams({
      ...{ regions: N, self: 1, weights: [1, 2, 1], limit: 100, periodMs: 10_000, leakageBudget: 10, maxClockSkewMs: 100 },
    });
    const lateView = emptyWindowSlot(N, 0);
    lateView.c[0] = 1;
    lateView.t[0] = 9_500;
    expect(
      windowAllowance(late, windowCells(mergeWindow(late, newWindowState(N), 0, 8_900, [{ ...lateView, t: [8_900, 0, 0] }]).state, 0), 1),
    ).toBe(1);
    const released = rebalanceWindow(late, mergeWindow(late, newWindowState(N), 0, 9_500, [lateView]).state, 0, 9_500);
    expect(windowAllowance(late, windowCells(released, 0), 1)).toBe(0);
  });

  it('an active giver keeps what it used and gives half the rest to hungry peers only', () => {
    const p = params();
    let state = newWindowState(N);
    for (let i = 0; i < 10; i++) state = decideWindow(p, state, 0, 5_000 + i, 1, false).state;
    const view = emptyWindowSlot(N, 5);
    view.c[0] = 5;
    view.t[0] = 5_015;
    const busy = mergeWindow(p, state, 0, 5_020, [view]).state; // peer 0 active but not hungry
    expect(windowCells(busy, 5).x[1]).toEqual([0, 0, 0]);
  });

  it('a peer whose requests cost more than it holds is hungry: its false denials are demand (issue 21, item 10)', () => {
    const p = params({ leakageBudget: 0, weights: [1, 1, 1], limit: 30 });
    const asked = federationParams({
      regions: N,
      self: 0,
      weights: [1, 1, 1],
      limit: 30,
      periodMs: 1_000,
      leakageBudget: 0,
      maxClockSkewMs: 100,
    });
    // Region 0 holds 10 and asks for 12 at once: denied, a false denial (the window has room), nothing admitted.
    const denied = decideWindow(asked, newWindowState(N), 0, 5_100, 12, false);
    expect(denied.allowed).toBe(false);
    expect(denied.falseDenial).toBe(true);
    const seen = windowCells(denied.state, 5);
    expect(seen.c[0]).toBe(0);
    expect(seen.t[0]).toBe(5_100);
    // Region 1 is busy itself (so no free donor) and hears of it: it gives to region 0, which then fits the request.
    let giver = newWindowState(N);
    for (let i = 0; i < 2; i++) giver = decideWindow(p, giver, 0, 5_090 + i, 1, false).state;
    const merged = mergeWindow(p, giver, 0, 5_110, [seen]).state;
    expect(windowCells(merged, 5).x[1]![0]).toBeGreaterThan(0);
  });

  it('token buckets move tokens with share: the giver debits what the receiver credits, once, in the epoch only', () => {
    const giver = params({ self: 1, periodMs: 10_000 });
    const receiver = params({ self: 0, periodMs: 10_000 });
    // The receiver spent its bucket in epoch 0; the giver is a fresh (full) free donor.
    let hot: BucketState | undefined;
    for (let i = 0; i < 40; i++) hot = decideBucket(receiver, hot, 0, 5_000 + i, 1).state ?? hot;
    const merged = mergeBucket(giver, undefined, 0, 5_050, hot!.slots).state!;
    const gave = windowCellsOfEpoch(merged, 0);
    expect(gave.x[1]![0]).toBe(giver.units[1]); // all of it: a free donor
    const moved = gave.y[1]![0]!;
    expect(moved).toBe(50); // min(τ·Δσ/σ, C·Δσ/S, τ − 1) = min(55, 50, 54): the budget part b_r stays
    // Conservation: what the giver holds now plus what it moved is what it held before.
    expect(merged.tokens + moved).toBeCloseTo(bucketCapacity(giver, giver.units[1]!), 9);
    const before = refill(receiver, hot!, 0, 5_100);
    const credited = mergeBucket(receiver, hot, 0, 5_100, merged.slots).state!;
    expect(credited.tokens).toBeCloseTo(before + moved, 9);
    // The same gossip again credits nothing.
    const again = mergeBucket(receiver, credited, 0, 5_100, merged.slots);
    expect(again.changed).toBe(false);
    // A transfer seen only after its epoch ended is never credited (nor counted in σ).
    const lateAt = 10_050;
    const late = mergeBucket(receiver, hot, 0, lateAt, merged.slots).state!;
    expect(refill(receiver, hot!, 0, lateAt)).toBeLessThan(bucketCapacity(receiver, receiver.units[0]!) - 1);
    expect(late.tokens).toBeCloseTo(refill(receiver, hot!, 0, lateAt), 9);
    // Nor before the fence end after a wipe (a forfeited epoch's cumulative y may have been credited already).
    const fenced = mergeBucket(receiver, undefined, 5_090, 5_100, merged.slots).state!;
    expect(fenced.tokens).toBe(0);
  });

  it('a giver passes received share on (rights follow traffic from region to region)', () => {
    const p = params({ self: 1 });
    const slots = [emptyEpochSlot(N, 3), emptyEpochSlot(N, 4), emptyEpochSlot(N, 5)];
    slots[2]!.x[0]![1] = 200_000; // region 0 gave 1 a share in epoch 5
    slots[2]!.c[2] = 30; // region 2 is hungry, and admitting: its last admission 20 ms ago (within the quiet span)
    slots[2]!.t[2] = 5_580;
    const { slots: after } = rebalanceBucket(p, slots, 0, 5_600, 50);
    // A free donor: its whole σ (own 500,000 + received 200,000) goes to the hungry peer.
    expect(after[2]!.x[1]![2]).toBe(700_000);
    expect(shareAt(p, after, 0, 5_600)).toBe(0);
    // In the skew span after the epoch it pays 700,000 but holds its 500,000 only: σ is clamped at 0.
    expect(shareAt(p, after, 0, 6_050)).toBe(0);
  });
});

/**
 * Region 0 (the holder) admits 5 at 1,000–1,004 ms of epoch 0; region 1 (a free donor) merges that and gives it all
 * its share; the holder merges the grant at 1,100.
 */
function donorGaveAll(periodMs: number) {
  const holder = params({ self: 0, periodMs, maxClockSkewMs: 500 });
  const donor = params({ self: 1, periodMs, maxClockSkewMs: 500 });
  let hot: BucketState | undefined;
  for (let i = 0; i < 5; i++) hot = decideBucket(holder, hot, 0, 1_000 + i, 1).state ?? hot;
  const given = mergeBucket(donor, undefined, 0, 1_050, hot!.slots).state!;
  expect(windowCellsOfEpoch(given, 0).x[1]![0]).toBe(donor.units[1]);
  const merged = mergeBucket(holder, hot, 0, 1_100, given.slots).state!;
  return { holder, donor, given, merged };
}

describe('token buckets: a false denial needs a peer that holds share', () => {
  /** Region 0 admits 5 early in epoch 0 and merges the grants of the free donors in `donors` (all their share). */
  function holderWithGrantsOf(donors: number[]) {
    const at = (self: number) => params({ self, periodMs: 60_000, leakageBudget: 0 });
    const holder = at(0);
    let hot: BucketState | undefined;
    for (let i = 0; i < 5; i++) hot = decideBucket(holder, hot, 0, 1_000 + i, 1).state ?? hot;
    let merged = hot!;
    for (const d of donors)
      merged = mergeBucket(holder, merged, 0, 1_100, mergeBucket(at(d), undefined, 0, 1_050, hot!.slots).state!.slots).state!;
    // Spend everything at 1.2 s, then again what the refill brought by 30 s: the bucket is empty there.
    let state = merged;
    for (const now of [1_200, 30_000]) {
      for (;;) {
        const decision = decideBucket(holder, state, 0, now, 1);
        if (!decision.allowed) break;
        state = decision.state!;
      }
    }
    return { holder, state, denied: decideBucket(holder, state, 0, 30_000, 1) };
  }

  it('is no false denial while this region holds every share unit: nobody could grant anything', () => {
    const { holder, state, denied } = holderWithGrantsOf([1, 2]);
    expect(shareAt(holder, state.slots, 0, 30_000)).toBe(holder.units.reduce((a, b) => a + b, 0));
    expect(denied.allowed).toBe(false);
    // One global bucket has refilled L·30/60 = 50 since the epoch began and this one admitted about that: the
    // view's room test alone (Σc + cost ≤ carried + L·elapsed/P) would call this false.
    expect(denied.falseDenial).toBe(false);
  });

  it('is one while a peer still holds share', () => {
    const { denied } = holderWithGrantsOf([1]);
    expect(denied.allowed).toBe(false);
    expect(denied.falseDenial).toBe(true);
  });
});

describe('bucketSweepIdle: a sweep the watch loop may skip', () => {
  // Minute epochs: the quiet span is idleMs/5 = 1 s, the returning span the last second.
  const P = 60_000;
  const E = 7;
  const shares = fc.array(fc.array(fc.integer({ min: 0, max: 400_000 }), { minLength: N, maxLength: N }), { minLength: N, maxLength: N });
  const state = fc
    .record({
      self: fc.integer({ min: 0, max: N - 1 }),
      at: fc.integer({ min: 0, max: P - 1 }),
      ownAgo: fc.integer({ min: 0, max: 1_500 }),
      peers: fc.array(fc.option(fc.integer({ min: 0, max: P - 1 }), { nil: undefined }), { minLength: N, maxLength: N }),
      c: row,
      x: shares,
      y: square,
      previous: epochSlot(E - 1),
      tokens: fc.integer({ min: 0, max: 100 }),
      refilledAgo: fc.integer({ min: 0, max: 5_000 }),
    })
    .map(({ self, at, ownAgo, peers, c, x, y, previous, tokens, refilledAgo }) => {
      const holder = params({ self, periodMs: P });
      const now = E * P + at;
      // Admission times in the epoch, at or before now: r's `ownAgo` ms ago, a peer's at a point of the epoch or never.
      const t = peers.map((offset, d) =>
        d === self ? Math.max(E * P, now - ownAgo) : offset === undefined ? 0 : Math.min(now, E * P + offset),
      );
      const current: EpochSlot = { id: E, c, x, y, t };
      const slots = [emptyEpochSlot(N), emptyEpochSlot(N), emptyEpochSlot(N)];
      slots[E % 3] = current;
      slots[(E - 1) % 3] = previous;
      const lastRefill = now - refilledAgo;
      const bucket: BucketState = { tokens, lastRefill, sig: shareAt(holder, slots, 0, lastRefill), slots };
      return { holder, bucket, now };
    });

  it('holds only where the sweep changes nothing and the key stays watched', () => {
    let idle = 0;
    fc.assert(
      fc.property(state, ({ holder, bucket, now }) => {
        if (!bucketSweepIdle(holder, bucket, now)) return;
        idle++;
        expect(sweepBucket(holder, bucket, 0, now).changed).toBe(false);
        expect(bucketHasHungryPeer(holder, bucket, now)).toBe(true);
      }),
      { numRuns: 3_000 },
    );
    // The generator reaches the case it is about (an active holder, idle peers) often enough to mean something.
    expect(idle).toBeGreaterThan(100);
  });

  it('holds from now until bucketSweepIdleUntil, with the state unchanged; undefined exactly where it does not hold', () => {
    let deferred = 0;
    fc.assert(
      fc.property(state, fc.double({ min: 0, max: 1, noNaN: true }), ({ holder, bucket, now }, fraction) => {
        const until = bucketSweepIdleUntil(holder, bucket, now);
        expect(until === undefined).toBe(!bucketSweepIdle(holder, bucket, now));
        if (until === undefined) return;
        // (until = now: the holder's quiet span ends now; nothing is put off.)
        expect(until).toBeGreaterThanOrEqual(now);
        if (until === now) return;
        deferred++;
        // Any instant of [now, until): the watch loop's deferred sweep would have changed nothing there either.
        const later = Math.min(until - 1, now + Math.floor(fraction * (until - now)));
        expect(bucketSweepIdle(holder, bucket, later)).toBe(true);
        expect(bucketSweepIdle(holder, bucket, until - 1)).toBe(true);
      }),
      { numRuns: 3_000 },
    );
    expect(deferred).toBeGreaterThan(100);
  });

  it('is false in the returning span, for a quiet holder, or with a peer that admitted within idleMs', () => {
    const holder = params({ self: 0, periodMs: P });
    const now = E * P + 30_000;
    const slot: EpochSlot = { ...emptyEpochSlot(N, E), c: [50, 0, 0], t: [now - 100, 0, 0] };
    slot.x = [
      [0, 0, 0],
      [300_000, 0, 0],
      [0, 0, 0],
    ];
    const slots = [emptyEpochSlot(N), emptyEpochSlot(N), emptyEpochSlot(N)];
    slots[E % 3] = slot;
    const bucket: BucketState = { tokens: 10, lastRefill: now, sig: shareAt(holder, slots, 0, now), slots };
    expect(bucketSweepIdle(holder, bucket, now)).toBe(true);
    // Idle until the holder's last admission is a quiet span (1 s) old.
    expect(bucketSweepIdleUntil(holder, bucket, now)).toBe(now - 100 + 1_000);
    expect(bucketSweepIdle(holder, bucket, (E + 1) * P - 500)).toBe(false);
    expect(bucketSweepIdle(holder, bucket, now + 1_500)).toBe(false);
    slots[E % 3] = { ...slot, t: [now - 100, now - 4_000, 0] };
    expect(bucketSweepIdle(holder, { ...bucket, slots }, now)).toBe(false);
  });
});

describe('token buckets at the end of an epoch', () => {
  it('received share goes back home with its tokens, and the donor holds its full share across the boundary', () => {
    // The donor (free) gave all its share to the busy holder in epoch 0.
    const { holder, donor, given, merged } = donorGaveAll(10_000);
    // The holder keeps admitting (so it is not a free donor, which would give the share back at once).
    const holding = decideBucket(holder, merged, 0, 8_600, 1).state!;
    // Before the last tenth (at most idleMs/5 = 1 s) the busy holder keeps it; in it, the holder returns it.
    expect(sweepBucket(holder, holding, 0, 8_900).changed).toBe(false);
    const returned = sweepBucket(holder, holding, 0, 9_100).state;
    const back = windowCellsOfEpoch(returned, 0);
    expect(back.x[0]![1]).toBe(donor.units[1]);
    expect(back.y[0]![1]!).toBeGreaterThan(0);
    const donorAfter = mergeBucket(donor, given, 0, 9_200, returned.slots).state!;
    // Netted skew term: the donor pays nothing for epoch 0 after the boundary, so its σ is its base share
    // (without the return it would hold 0 until 10_500), and the tokens it got back are not clamped away.
    expect(shareAt(donor, donorAfter.slots, 0, 10_100)).toBe(donor.units[1]);
    expect(shareAt(donor, given.slots, 0, 10_100)).toBe(0);
    expect(refill(donor, donorAfter, 0, 10_100)).toBeGreaterThan(refill(donor, given, 0, 10_100) + 1);
  });
});

describe('token buckets after a burst', () => {
  it('a holder whose burst stopped (a free donor) sends received share back with its tokens before the epoch ends', () => {
    const { holder, donor, given, merged: holding } = donorGaveAll(60_000);
    // Until it has stopped (its burst began in this epoch: no admission for the quiet span, min(idleMs/5, P/20) = 1 s,
    // after its last one: the span in which its peers still count it as admitting) the holder keeps what it got.
    expect(sweepBucket(holder, holding, 0, 1_900).changed).toBe(false);
    // Stopped since, nobody wanting share: everything it holds of the donor's goes back, tokens with it, 58 s
    // before the end-of-epoch return would have sent it.
    const returned = sweepBucket(holder, holding, 0, 2_100);
    expect(returned.changed).toBe(true);
    const back = windowCellsOfEpoch(returned.state, 0);
    expect(back.x[0]![1]).toBe(donor.units[1]);
    expect(back.y[0]![1]!).toBeGreaterThan(0);
    // The holder is back at its own share; the donor, once it merges, at its own too, with the tokens.
    expect(shareAt(holder, returned.state.slots, 0, 2_100)).toBe(holder.units[0]);
    const donorAfter = mergeBucket(donor, given, 0, 3_200, returned.state.slots).state!;
    expect(shareAt(donor, donorAfter.slots, 0, 3_200)).toBe(donor.units[1]);
    expect(donorAfter.tokens).toBeGreaterThan(refill(donor, given, 0, 3_200) + 1);
    // Nothing bounces: the donor holds nothing of the holder's, and the holder is done.
    expect(sweepBucket(donor, donorAfter, 0, 4_500).changed).toBe(false);
    expect(sweepBucket(holder, returned.state, 0, 4_500).changed).toBe(false);
  });
});

describe('stopped: the test of a region that admitted in the window', () => {
  const minute = params({ periodMs: 60_000 });
  /** Region 0's slots: `count` admissions in the window of minute 1, the last at `lastAt`; `before` in minute 0. */
  function slots(count: number, lastAt: number, before: number) {
    const slot = emptyWindowSlot(N, 1);
    slot.c[0] = count;
    slot.t[0] = lastAt;
    const previous = emptyWindowSlot(N, 0);
    previous.c[0] = before;
    previous.t[0] = before > 0 ? 59_000 : 0;
    return { slot, previous };
  }

  it('stops a burst that began late in the window after the quiet span, not ten of its gaps since the window began', () => {
    // 120 admissions ending 30.1 s into the minute: their "average gap" since the window's start is 251 ms, so
    // quiet() waits 2.5 s; the burst began in this window (nothing in the one before), so the quiet span (1 s) is all.
    const { slot, previous } = slots(120, 90_100, 0);
    expect(quiet(minute, slot, 0, 91_200)).toBe(false);
    expect(stopped(minute, slot, previous, 0, 91_000)).toBe(false);
    expect(stopped(minute, slot, previous, 0, 91_200)).toBe(true);
  });

  it('keeps ten of its gaps for traffic carried over from the window before, and stops a region that admitted nothing', () => {
    const { slot, previous } = slots(120, 90_100, 50);
    expect(stopped(minute, slot, previous, 0, 91_200)).toBe(false);
    expect(stopped(minute, slot, previous, 0, 92_700)).toBe(true);
    const idle = slots(0, 0, 0);
    expect(stopped(minute, idle.slot, idle.previous, 0, 91_200)).toBe(true);
  });
});

describe('windows after a burst', () => {
  it('a holder whose burst stopped hands the allowance it received back, keeping one request', () => {
    const periodMs = 60_000;
    const holder = params({ self: 0, periodMs });
    const donor = params({ self: 1, periodMs });
    // Region 0 admits 5 at 1,000–1,004 ms of window 0; region 1, a free donor, gives it all but one request.
    let hot = newWindowState(N);
    for (let i = 0; i < 5; i++) hot = decideWindow(holder, hot, 0, 1_000 + i, 1, false).state ?? hot;
    const given = mergeWindow(donor, newWindowState(N), 0, 1_050, hot.slots).state;
    const gift = windowCells(given, 0).x[1]![0]!;
    expect(gift).toBe(windowBase(donor, 1, 0) - 1);
    const holding = mergeWindow(holder, hot, 0, 1_100, given.slots).state;
    // Stopped in its peers' eyes after the quiet span (1 s; its burst began in this window): until then it keeps it.
    expect(sweepWindow(holder, holding, 0, 1_900).changed).toBe(false);
    const returned = sweepWindow(holder, holding, 0, 2_100);
    expect(returned.changed).toBe(true);
    const back = windowCells(returned.state, 0);
    expect(back.x[0]![1]).toBe(gift);
    // Back at its own base less what it used; the donor, once it merges, at its own base (less the one it keeps).
    expect(windowAllowance(holder, back, 0) - back.c[0]!).toBe(windowBase(holder, 0, 0) - 5);
    const donorAfter = mergeWindow(donor, given, 0, 3_200, returned.state.slots).state;
    expect(windowAllowance(donor, windowCells(donorAfter, 0), 1)).toBe(windowBase(donor, 1, 0));
    // Nothing bounces.
    expect(sweepWindow(donor, donorAfter, 0, 4_500).changed).toBe(false);
    expect(sweepWindow(holder, returned.state, 0, 4_500).changed).toBe(false);
  });
});

function windowCellsOfEpoch(state: BucketState, id: number): EpochSlot {
  return state.slots.find((slot) => slot.id === id) ?? emptyEpochSlot(N, id);
}

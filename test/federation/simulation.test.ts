// Properties that try to break the leakage bound: thousands of generated schedules with partitions (full,
// one-way, flapping), delays up to seconds, duplicated and reordered jobs, crashes with wipes, stalled workers
// and clock skew within the configured bound.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LeakageBudget } from '../../src/config/schema.ts';
import { SHARE_UNITS, resolveLeakageBudget } from '../../src/protocol/index.ts';
import {
  simulate,
  type Fault,
  type Scenario,
  type SimAlgorithm,
  type SimDecision,
  type TrafficShape,
} from '../support/simulation/index.ts';

const NAMES = ['ap', 'eu', 'sa', 'us'];

interface Shape {
  regions: number;
  periodMs: number;
  durationMs: number;
  skew: number;
}

function faultArb(shape: Shape): fc.Arbitrary<Fault> {
  const names = NAMES.slice(0, shape.regions);
  const name = fc.constantFrom(...names);
  const at = fc.integer({ min: 0, max: shape.durationMs });
  return fc.oneof(
    fc.record({ at, kind: fc.constant('partition' as const), groups: fc.subarray(names).map((group) => [group]) }),
    fc.record({ at, kind: fc.constant('heal' as const) }),
    fc.record({ at, kind: fc.constantFrom('linkDown' as const, 'linkUp' as const), from: name, to: name }),
    fc.record({
      at,
      kind: fc.constant('flap' as const),
      from: name,
      to: name,
      everyMs: fc.integer({ min: 5, max: 700 }),
      until: fc.integer({ min: 0, max: shape.durationMs }),
    }),
    fc.record({ at, kind: fc.constant('crash' as const), region: name, wipe: fc.boolean() }),
    fc.record({ at, kind: fc.constant('restart' as const), region: name }),
    fc.record({ at, kind: fc.constantFrom('workerStop' as const, 'workerStart' as const), region: name }),
  );
}

function trafficShapeArb(shape: Shape): fc.Arbitrary<TrafficShape> {
  return fc.oneof(
    fc.constant({ kind: 'even' as const }),
    fc.constantFrom(...NAMES.slice(0, shape.regions)).map((region) => ({ kind: 'region' as const, region })),
    fc.integer({ min: 50, max: 2_000 }).map((everyMs) => ({ kind: 'shifting' as const, everyMs })),
    fc.array(fc.integer({ min: 0, max: 5 }), { minLength: shape.regions, maxLength: shape.regions }).map((weights) => ({
      kind: 'weighted' as const,
      weights: weights.some((w) => w > 0) ? weights : weights.map(() => 1),
    })),
  );
}

const budgetArb: fc.Arbitrary<LeakageBudget> = fc.oneof(fc.integer({ min: 0, max: 15 }), fc.constantFrom('0%', '5%', '10%', '30%'));

function scenarioArb(algorithms: SimAlgorithm[], budget: fc.Arbitrary<LeakageBudget> = budgetArb): fc.Arbitrary<Scenario> {
  return fc
    .record({
      regions: fc.integer({ min: 1, max: 4 }),
      periodMs: fc.integer({ min: 200, max: 2_000 }),
      periods: fc.integer({ min: 1, max: 5 }),
      skew: fc.integer({ min: 0, max: 600 }),
    })
    .chain((shape) => {
      const full: Shape = { ...shape, durationMs: shape.periodMs * shape.periods };
      const names = NAMES.slice(0, shape.regions);
      const half = Math.floor(shape.skew / 2);
      return fc.record({
        regions: fc.tuple(
          ...names.map((name) =>
            fc.record({
              name: fc.constant(name),
              weight: fc.integer({ min: 1, max: 4 }),
              clockOffsetMs: fc.integer({ min: -half, max: half }),
            }),
          ),
        ),
        rule: fc.record({
          algorithm: fc.constantFrom(...algorithms),
          limit: fc.integer({ min: 1, max: 60 }),
          periodMs: fc.constant(shape.periodMs),
          burst: fc.option(fc.integer({ min: 1, max: 80 }), { nil: undefined }),
          leakageBudget: budget,
        }),
        syncIntervalMs: fc.integer({ min: 20, max: 400 }),
        maxClockSkewMs: fc.constant(shape.skew),
        durationMs: fc.constant(full.durationMs),
        link: fc.record({
          latencyMs: fc.oneof(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 100, max: 3_000 })),
          jitterMs: fc.integer({ min: 0, max: 1_500 }),
          duplicateProbability: fc.constantFrom(0, 0.1, 0.5),
        }),
        ackTimeoutMs: fc.integer({ min: 50, max: 2_000 }),
        faults: fc.array(faultArb(full), { maxLength: 10 }),
        traffic: fc.array(
          fc.oneof(
            fc.record({
              key: fc.constantFrom('hot', 'cold'),
              ratePerSec: fc.integer({ min: 1, max: 100 }),
              shape: trafficShapeArb(full),
              cost: fc.integer({ min: 1, max: 3 }),
            }),
            // Bursts in one region at a time (what makes free donors give everything and rights pass on).
            fc
              .record({
                key: fc.constantFrom('hot', 'cold'),
                ratePerSec: fc.integer({ min: 100, max: 2_000 }),
                shape: fc.constantFrom(...names).map((region) => ({ kind: 'region' as const, region })),
                cost: fc.integer({ min: 1, max: 3 }),
                startMs: fc.integer({ min: 0, max: full.durationMs }),
                lengthMs: fc.integer({ min: 1, max: 400 }),
              })
              .map(({ lengthMs, ...stream }) => ({ ...stream, endMs: stream.startMs + lengthMs })),
          ),
          { minLength: 1, maxLength: 4 },
        ),
        fastLaneMs: fc.option(fc.integer({ min: 0, max: 50 }), { nil: undefined }),
        audit: fc.constant(true),
      }) as fc.Arbitrary<Scenario>;
    });
}

function budgetOf(scenario: Scenario): number {
  return resolveLeakageBudget(scenario.rule.limit, scenario.rule.leakageBudget, scenario.regions.length) ?? Infinity;
}

/** Σ admitted per key and window id (each decision counted in its deciding region's window). */
function windowTotals(decisions: SimDecision[]): Map<string, number> {
  const totals = new Map<string, number>();
  for (const decision of decisions) {
    if (!decision.allowed) continue;
    const id = `${decision.key}|${decision.window}`;
    totals.set(id, (totals.get(id) ?? 0) + decision.cost);
  }
  return totals;
}

/**
 * The largest excess over capacity + budget + rate·(t_j − t_i) over all intervals [t_i, t_j] between
 * admissions of one key: max_j (S_j − rate·t_j) + max_{i≤j} (rate·t_i − S_{i−1}), in O(n).
 */
function worstIntervalExcess(decisions: SimDecision[], key: string, allowance: number, ratePerMs: number): number {
  let prefix = 0;
  let best = -Infinity;
  let worst = -Infinity;
  for (const decision of decisions) {
    if (!decision.allowed || decision.key !== key) continue;
    best = Math.max(best, ratePerMs * decision.t - prefix);
    prefix += decision.cost;
    worst = Math.max(worst, prefix - ratePerMs * decision.t + best - allowance);
  }
  return worst;
}

describe('window algorithms: Σ admitted ≤ limit + budget in every window', () => {
  it('holds over generated adversarial schedules', () => {
    fc.assert(
      fc.property(scenarioArb(['fixedWindow', 'slidingWindow']), fc.integer(), (scenario, seed) => {
        const { decisions, stats } = simulate(scenario, seed);
        expect(stats.invariantViolations).toEqual([]);
        const bound = scenario.rule.limit + budgetOf(scenario);
        for (const [window, total] of windowTotals(decisions)) {
          if (total > bound) throw new Error(`window ${window}: admitted ${total} > ${bound}`);
        }
      }),
      { numRuns: 1_500 },
    );
  });
});

describe('token bucket: admissions over any interval ≤ capacity + budget + rate × length', () => {
  it('holds over generated adversarial schedules, and Σσ ≤ S at every instant', () => {
    fc.assert(
      fc.property(scenarioArb(['tokenBucket']), fc.integer(), (scenario, seed) => {
        const { decisions, stats } = simulate(scenario, seed);
        expect(stats.invariantViolations).toEqual([]);
        expect(stats.maxShareSum).toBeLessThanOrEqual(SHARE_UNITS);
        const { limit, periodMs, burst } = scenario.rule;
        const allowance = (burst ?? limit) + budgetOf(scenario) + 1e-6;
        for (const key of ['hot', 'cold']) {
          const excess = worstIntervalExcess(decisions, key, allowance, limit / periodMs);
          if (excess > 0) throw new Error(`${key}: an interval admitted ${excess} beyond the bound`);
        }
      }),
      { numRuns: 1_200 },
    );
  });

  it('the interval check itself catches an over-admission', () => {
    const decisions: SimDecision[] = [0, 10, 20].map((t) => ({ t, local: t, region: 0, key: 'k', cost: 1, allowed: true, window: 0 }));
    expect(worstIntervalExcess(decisions, 'k', 2, 0.001)).toBeGreaterThan(0);
    expect(worstIntervalExcess(decisions, 'k', 3, 0.001)).toBeLessThanOrEqual(0);
  });
});

describe('the budget is what bounds leakage', () => {
  const partitioned = (algorithm: SimAlgorithm, leakageBudget: LeakageBudget): Scenario => ({
    regions: [{ name: 'ap' }, { name: 'eu' }, { name: 'us' }],
    rule: { algorithm, limit: 100, periodMs: 10_000, leakageBudget },
    syncIntervalMs: 100,
    maxClockSkewMs: 500,
    durationMs: 30_000,
    link: { latencyMs: 50 },
    faults: [{ at: 0, kind: 'partition', groups: [['ap'], ['eu'], ['us']] }],
    traffic: [{ key: 'hot', ratePerSec: 100, shape: { kind: 'even' } }],
  });

  it('unbounded mode over-admits in a partition (each side spends the whole limit)', () => {
    const { decisions } = simulate(partitioned('fixedWindow', 'unbounded'), 7);
    const worst = Math.max(...windowTotals(decisions).values());
    expect(worst).toBeGreaterThan(100 + 5);
    expect(worst).toBe(300);
  });

  it('the same partition with a 5% budget stays within limit + budget', () => {
    const { decisions } = simulate(partitioned('fixedWindow', '5%'), 7);
    const worst = Math.max(...windowTotals(decisions).values());
    expect(worst).toBeLessThanOrEqual(105);
    expect(worst).toBeGreaterThan(90); // and every side kept serving its share
  });

  it('fast-check finds a violating schedule when the budget is "unbounded"', () => {
    const result = fc.check(
      fc.property(scenarioArb(['fixedWindow'], fc.constant('unbounded' as const)), fc.integer(), (scenario, seed) => {
        const { decisions } = simulate({ ...scenario, audit: false }, seed);
        const bound = scenario.rule.limit + Math.floor(scenario.rule.limit * 0.05);
        for (const total of windowTotals(decisions).values()) if (total > bound) return false;
        return true;
      }),
      { numRuns: 500 },
    );
    expect(result.failed).toBe(true);
  });

  it('unbounded token buckets over-admit in a partition too', () => {
    const scenario = partitioned('tokenBucket', 'unbounded');
    const { decisions } = simulate(scenario, 3);
    expect(worstIntervalExcess(decisions, 'hot', 100 + 5, 100 / 10_000)).toBeGreaterThan(0);
    const bounded = simulate(partitioned('tokenBucket', '5%'), 3);
    expect(worstIntervalExcess(bounded.decisions, 'hot', 100 + 5 + 1e-6, 100 / 10_000)).toBeLessThanOrEqual(0);
  });
});

describe('determinism', () => {
  it('the same scenario and seed give the same trace', () => {
    fc.assert(
      fc.property(scenarioArb(['fixedWindow', 'tokenBucket']), fc.integer(), (scenario, seed) => {
        expect(simulate(scenario, seed).decisions).toEqual(simulate(scenario, seed).decisions);
      }),
      { numRuns: 50 },
    );
  });
});

// Accuracy against one exact global limiter on the same traffic, availability under a partition and
// convergence after the heal. Deterministic seeds; the figures are virtual-time.
import { describe, expect, it } from 'vitest';
import { simulate, type Scenario, type SimResult, type TrafficShape, type TrafficStream } from '../support/simulation/index.ts';
import {
  BUDGET,
  BURSTS,
  LIMIT,
  burst,
  STEADY,
  healthy as healthyRun,
  overallRatio,
  percentile,
  runBurst,
  steady,
  windowRatios,
} from '../support/federation-traffic.ts';

const MINUTE = 60_000;

function healthy(shape: TrafficShape, ratePerSec: number, algorithm: Scenario['rule']['algorithm'] = 'fixedWindow'): Scenario {
  return {
    regions: [{ name: 'ap' }, { name: 'eu' }, { name: 'us' }],
    rule: { algorithm, limit: 1_000, periodMs: MINUTE, leakageBudget: '5%' },
    syncIntervalMs: 100,
    maxClockSkewMs: 1_000,
    durationMs: 6 * MINUTE,
    link: { latencyMs: 50, jitterMs: 10 },
    traffic: [{ key: 'k', ratePerSec, shape }],
  };
}

/** Per full window: federated admissions / exact admissions. */
function ratios(result: SimResult): number[] {
  return fullWindows(result).map((window) => window.admitted / window.exactAdmitted);
}

function fullWindows(result: SimResult): SimResult['stats']['windows'] {
  return result.stats.windows.filter((window) => window.window < 6);
}

describe('accuracy when healthy: syncIntervalMs 100, 50 ms one way, L = 1000/min, budget 5%', () => {
  for (const seed of [1, 2, 3]) {
    for (const rate of [20, 100]) {
      it(`traffic all in one region (${rate}/s, seed ${seed}): ≥ 95% of the exact limiter in every window`, () => {
        const result = simulate(healthy({ kind: 'region', region: 'eu' }, rate), seed);
        expect(fullWindows(result)).toHaveLength(6);
        for (const ratio of ratios(result)) expect(ratio).toBeGreaterThanOrEqual(0.95);
      });

      it(`evenly spread traffic (${rate}/s, seed ${seed}): ≥ 97% in every window, never above limit + budget`, () => {
        const result = simulate(healthy({ kind: 'even' }, rate), seed);
        expect(fullWindows(result)).toHaveLength(6);
        for (const ratio of ratios(result)) expect(ratio).toBeGreaterThanOrEqual(0.97);
        for (const window of result.stats.windows) expect(window.admitted).toBeLessThanOrEqual(1_050);
      });
    }
  }

  it('gossip makes a gossiped admission visible in the other regions within one sync interval plus the latency', () => {
    const { stats } = simulate(healthy({ kind: 'even' }, 20), 1);
    expect(stats.syncLagMs.length).toBeGreaterThan(1_000);
    expect(percentile(stats.syncLagMs, 99)).toBeLessThanOrEqual(100 + 50 + 10);
  });
});

describe('availability under partition', () => {
  const scenario: Scenario = {
    ...healthy({ kind: 'even' }, 60),
    durationMs: 4 * MINUTE,
    faults: [
      { at: 30_000, kind: 'partition', groups: [['us'], ['ap', 'eu']] },
      { at: 150_000, kind: 'heal' },
    ],
    probes: [150_000],
  };
  const result = simulate(scenario, 11);
  const admittedBy = (region: number, window: number): number =>
    result.decisions.filter((d) => d.allowed && d.region === region && d.window === window).reduce((n, d) => n + d.cost, 0);

  it('the cut-off region keeps serving its share, the connected ones theirs, all within limit + budget', () => {
    // floor(1050/3) = 350 each: the bases add up to exactly L + B.
    const base = 350;
    // Window 1 lies wholly inside the partition: nobody can hear anybody across the cut.
    expect(admittedBy(2, 1)).toBe(base);
    expect(admittedBy(0, 1) + admittedBy(1, 1)).toBeGreaterThanOrEqual(2 * base - 2);
    for (const window of result.stats.windows) expect(window.admitted).toBeLessThanOrEqual(1_050);
  });

  it('after the heal every view includes every region’s state within two sync intervals plus the round trip', () => {
    const [probe] = result.stats.convergence;
    expect(probe?.convergedAt).not.toBeNull();
    const lag = probe!.convergedAt! - probe!.probe;
    expect(lag).toBeLessThanOrEqual(2 * 100 + 2 * (50 + 10));
  });
});

const ALGORITHMS = ['fixedWindow', 'slidingWindow', 'tokenBucket'] as const;

/** Admissions of one key over [t1, t2] never exceed C + B + (L/P)(t2 − t1) (token bucket bound). */
function bucketExcess(result: SimResult, limit = LIMIT, budget = BUDGET): number {
  let prefix = 0;
  let best = -Infinity;
  let worst = -Infinity;
  const rate = limit / MINUTE;
  for (const decision of result.decisions) {
    if (!decision.allowed) continue;
    best = Math.max(best, rate * decision.t - prefix);
    prefix += decision.cost;
    worst = Math.max(worst, prefix - rate * decision.t + best - (limit + budget + 1e-6));
  }
  return worst;
}

/** L + B (buckets: C + B + rate·T) holds; `budget` is the scenario's 5% of `limit`, as the engine resolves it. */
function withinBound(algorithm: (typeof ALGORITHMS)[number], result: SimResult, limit = LIMIT, budget = BUDGET): void {
  if (algorithm === 'tokenBucket') expect(bucketExcess(result, limit, budget)).toBeLessThanOrEqual(0);
  else for (const window of result.stats.windows) expect(window.admitted).toBeLessThanOrEqual(limit + budget);
}

// Accuracy when healthy: a fresh key, 3 regions, sync 100 ms, 50 ms one way (+0–10 ms jitter), the fast lane on;
// every algorithm that federates, from the key's first request (the first window/epoch included).
describe('healthy federation: bursts on a fresh key against one exact global limiter', () => {
  for (const algorithm of ALGORITHMS) {
    for (const test of BURSTS) {
      it(`${algorithm}, ${test.name}: ≥ ${(100 * test.target(algorithm)).toFixed(1)}% of the exact limiter, within the bound`, () => {
        for (const seed of [1, 2, 3]) {
          const result = runBurst(test, algorithm, seed);
          expect(overallRatio(result)).toBeGreaterThanOrEqual(test.target(algorithm) - 1e-9);
          withinBound(algorithm, result);
        }
      });
    }
  }
});

describe('healthy federation: long-running shapes, every window/epoch from the first ≥ 97% (every federating algorithm)', () => {
  for (const algorithm of ALGORITHMS) {
    for (const test of STEADY) {
      it(`${algorithm}, ${test.name} at ${test.ratePerSec}/s`, () => {
        for (const seed of [1, 2, 3]) {
          const result = simulate(steady(test, algorithm), seed);
          const ratios = windowRatios(result);
          expect(ratios).toHaveLength(6);
          ratios.forEach((ratio, window) => expect(ratio, `seed ${seed}, window ${window}`).toBeGreaterThanOrEqual(0.97));
          withinBound(algorithm, result);
        }
      });
    }
  }
});

// Short periods (the chaos lab's 300 per 5 s, demand moving every 2 s at 80/s): the quiet span is at most P/20,
// so a region whose traffic moved away frees its allowance within a quarter second, not a fifth of the window.
describe('short periods: shifting demand on 300 per 5 s', () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: ≥ 93% of the exact limiter over six windows, within the bound`, () => {
      for (const seed of [1, 2, 3]) {
        const result = simulate(
          {
            ...healthyRun([{ key: 'k', ratePerSec: 80, shape: { kind: 'shifting', everyMs: 2_000 } }], algorithm, 30_000),
            rule: { algorithm, limit: 300, periodMs: 5_000, leakageBudget: '5%' },
            maxClockSkewMs: 100,
          },
          seed,
        );
        expect(overallRatio(result), `seed ${seed}`).toBeGreaterThanOrEqual(0.93);
        if (algorithm !== 'tokenBucket') for (const window of result.stats.windows) expect(window.admitted).toBeLessThanOrEqual(315);
      }
    });
  }
});

/** One row of the figures table: worst and mean ratio, sync lag, time to grant, false denials and fast sends per run. */
function figureLine(
  algorithm: (typeof ALGORITHMS)[number],
  traffic: string,
  target: string,
  results: SimResult[],
  ratiosOf: (result: SimResult) => number[],
): string {
  for (const result of results) withinBound(algorithm, result);
  const values = results.flatMap(ratiosOf);
  const lags = results.flatMap((result) => result.stats.syncLagMs);
  const grants = results.flatMap((result) => result.stats.timeToGrantMs);
  const perRun = (total: number) => Math.round(total / results.length);
  const quantiles = (list: number[]) => (list.length > 0 ? `${percentile(list, 50)} / ${percentile(list, 99)} ms` : '–');
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return (
    `| ${algorithm} | ${traffic} | ≥ ${target} | ${(100 * Math.min(...values)).toFixed(1)}% | ${(100 * mean).toFixed(1)}% | ` +
    `${quantiles(lags)} | ${quantiles(grants)} | ` +
    `${perRun(results.reduce((t, r) => t + r.stats.falseDenials, 0))} | ${perRun(results.reduce((t, r) => t + r.stats.fastSends, 0))} |`
  );
}

// Opt-in (a few minutes of CPU): FEDERATION_FIGURES=1 npx vitest run test/federation/simulation-accuracy.test.ts
describe('figures for docs/federation.md §5 (printed; each run also checked against the bound)', () => {
  it.runIf(process.env.FEDERATION_FIGURES)('algorithm × traffic shape, seeds 1-3, first window/epoch included', () => {
    const lines: string[] = [];
    for (const algorithm of ALGORITHMS) {
      for (const test of BURSTS) {
        const results = [1, 2, 3].map((seed) => runBurst(test, algorithm, seed));
        lines.push(figureLine(algorithm, test.name, `${(100 * test.target(algorithm)).toFixed(0)}%`, results, (r) => [overallRatio(r)]));
      }
      for (const test of STEADY) {
        const results = [1, 2, 3].map((seed) => simulate(steady(test, algorithm), seed));
        lines.push(figureLine(algorithm, `${test.name} ${test.ratePerSec}/s (per window)`, '97%', results, windowRatios));
      }
    }
    console.log(
      [
        '| algorithm | traffic | target | worst | mean | sync lag p50 / p99 | time to grant p50 / p99 | false ' +
          'denials / run | fast sends / run |',
        '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
        ...lines,
      ].join('\n'),
    );
    expect(lines).toHaveLength(ALGORITHMS.length * (BURSTS.length + STEADY.length));
  });
});

// Issue 20's sequential case with requests in flight: one key, 0.4 L into us in about 150 ms (16–32 requests in
// flight at a few ms each), a 1.5 s pause, then eu, pause, ap, two rounds, at the issue's limits (token bucket
// 1,000/min, sliding window 100, fixed window 10; budget 5%). A region's burst is over before a grant could come
// (one round trip ≈ 110 ms), so it is decided with what the region holds when it starts: the holder of the last
// burst must have handed the rights back by then (a free donor returns received share, docs/federation.md §3).
const SEQUENTIAL_LIMITS = { tokenBucket: 1_000, slidingWindow: 100, fixedWindow: 10 } as const;

function sequentialInFlight(limit: number): TrafficStream[] {
  const spreadMs = 150;
  return ['us', 'eu', 'ap', 'us', 'eu', 'ap'].map((region, i) =>
    burst(region, Math.round(0.4 * limit), 5_000 + i * (spreadMs + 1_500), spreadMs),
  );
}

describe('healthy federation: the sequential case with requests in flight (issue 20), every federating algorithm', () => {
  for (const algorithm of ALGORITHMS) {
    const limit = SEQUENTIAL_LIMITS[algorithm];
    for (const maxWaitMs of [0, 250]) {
      const target = maxWaitMs === 0 ? 0.9 : 0.97;
      it(`${algorithm}, L = ${limit}${maxWaitMs ? `, maxWaitMs ${maxWaitMs}` : ''}: ≥ ${100 * target}% of the exact limiter, within the bound`, () => {
        for (const seed of [1, 2, 3]) {
          const base = healthyRun(sequentialInFlight(limit), algorithm, 20_000);
          const scenario: Scenario = { ...base, rule: { ...base.rule, limit }, ...(maxWaitMs ? { maxWaitMs } : {}) };
          const result = simulate(scenario, seed);
          expect(overallRatio(result), `seed ${seed}`).toBeGreaterThanOrEqual(target);
          withinBound(algorithm, result, limit, Math.floor(0.05 * limit));
        }
      });
    }
  }
});

// The same case on a key that had traffic in the previous window (as in the chaos lab, whose scenarios reuse their
// key): each window region that drew its peers' allowance hands it back once it is quiet (docs/federation.md §2,
// "Return"), so the next region's burst finds its own base. At the chaos lab's 300 per minute, starting 5 s into the
// minute after a small burst from every region in the one before.
describe('healthy federation: the sequential case after traffic in the previous window, window algorithms', () => {
  for (const algorithm of ['fixedWindow', 'slidingWindow'] as const) {
    it(`${algorithm}, L = 300: ≥ 90% of the exact limiter, within the bound`, () => {
      const limit = 300;
      const warm = ['us', 'eu', 'ap'].map((region, i) => burst(region, Math.round(0.1 * limit), 2_000 + i * 1_650, 150));
      const sequence = ['us', 'eu', 'ap', 'us', 'eu', 'ap'].map((region, i) =>
        burst(region, Math.round(0.4 * limit), 65_000 + i * 1_650, 150),
      );
      for (const seed of [1, 2, 3]) {
        const base = healthyRun([...warm, ...sequence], algorithm, 80_000);
        const result = simulate({ ...base, rule: { ...base.rule, limit } }, seed);
        expect(overallRatio(result), `seed ${seed}`).toBeGreaterThanOrEqual(0.9);
        withinBound(algorithm, result, limit, Math.floor(0.05 * limit));
      }
    });
  }
});

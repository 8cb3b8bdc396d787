// Accuracy against one exact global limiter on the same traffic (issue 3, item 6), availability under a
// partition and convergence after the heal (item 5). Deterministic seeds; the figures are virtual-time.
import { describe, expect, it } from 'vitest';
import { simulate, type Scenario, type SimResult, type TrafficShape } from '../../src/federation/simulation.ts';

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

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
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

  it('gossip makes an admission visible in the other regions within one sync interval plus the latency', () => {
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

// Opt-in (about a minute of CPU): FEDERATION_FIGURES=1 npx vitest run test/federation/simulation-accuracy.test.ts
describe('figures for docs/federation.md (printed; each run also checked against the bound)', () => {
  it.runIf(process.env.FEDERATION_FIGURES)('algorithm × traffic shape × rate, seeds 1-3', () => {
    const lines: string[] = [];
    const budget = 50;
    for (const algorithm of ['fixedWindow', 'slidingWindow', 'tokenBucket'] as const) {
      for (const shape of [{ kind: 'region', region: 'eu' }, { kind: 'even' }, { kind: 'shifting', everyMs: 20_000 }] as const) {
        for (const rate of [20, 100]) {
          const values: number[] = [];
          const lags: number[] = [];
          for (const seed of [1, 2, 3]) {
            const result = simulate(healthy(shape, rate, algorithm), seed);
            // A token bucket starts full everywhere; its first epoch is not comparable.
            const windows = fullWindows(result).filter((window) => algorithm !== 'tokenBucket' || window.window > 0);
            values.push(...windows.map((window) => window.admitted / window.exactAdmitted));
            lags.push(...result.stats.syncLagMs);
            if (algorithm !== 'tokenBucket') {
              for (const window of result.stats.windows) expect(window.admitted).toBeLessThanOrEqual(1_000 + budget);
            }
          }
          const mean = values.reduce((a, b) => a + b, 0) / values.length;
          lines.push(
            `| ${algorithm} | ${shape.kind} | ${rate}/s | ${(100 * Math.min(...values)).toFixed(1)}% | ${(100 * mean).toFixed(1)}% | ${percentile(lags, 50)} / ${percentile(lags, 99)} ms |`,
          );
        }
      }
    }
    console.log(['| algorithm | traffic | rate | worst window | mean | sync lag p50 / p99 |', '| --- | --- | --- | --- | --- | --- |', ...lines].join('\n'));
    expect(lines).toHaveLength(18);
  });
});

// Traffic shapes of the healthy-accuracy cases for the virtual-time simulation: the healthy setup (3 regions, sync 100 ms, 50 ms
// one way + 0–10 ms jitter, the fast lane on) and the bursts, the sequential case and the long-running shapes,
// each measured against one exact global limiter over the same trace.
import { simulate, type Scenario, type SimAlgorithm, type SimResult, type TrafficShape, type TrafficStream } from './simulation/index.ts';

export const MINUTE = 60_000;
/** Window algorithms admit at most L; token buckets L per minute with capacity C = L. */
export const LIMIT = 1_000;
export const BUDGET = 50;

export function healthy(traffic: TrafficStream[], algorithm: SimAlgorithm, durationMs: number): Scenario {
  return {
    regions: [{ name: 'ap' }, { name: 'eu' }, { name: 'us' }],
    rule: { algorithm, limit: LIMIT, periodMs: MINUTE, leakageBudget: '5%' },
    syncIntervalMs: 100,
    maxClockSkewMs: 1_000,
    durationMs,
    link: { latencyMs: 50, jitterMs: 10 },
    traffic,
    fastLaneMs: 20,
  };
}

/** `count` requests (Poisson) in one region between `startMs` and `startMs + spreadMs`, on a fresh key. */
export function burst(region: string, count: number, startMs: number, spreadMs: number): TrafficStream {
  return { key: 'k', ratePerSec: (1_000 * count) / spreadMs, shape: { kind: 'region', region }, startMs, endMs: startMs + spreadMs };
}

export interface BurstCase {
  name: string;
  traffic: TrafficStream[];
  durationMs: number;
  /** Target: federated / exact over the whole run. */
  target: (algorithm: SimAlgorithm) => number;
  /** rules[].maxWaitMs: false denials wait for a grant this long. */
  maxWaitMs?: number;
}

const START = 5_000;
/** Late in the window: a region's average gap since the window's start then says nothing about a burst. */
const LATE = 45_000;

function sequential(start: number): TrafficStream[] {
  return [burst('us', 400, start, 1_400), burst('eu', 400, start + 2_900, 1_400), burst('ap', 400, start + 5_800, 1_400)];
}

/** The one-shot shapes of the healthy-accuracy table (all on a never-seen key, in the key's first window/epoch). */
export const BURSTS: BurstCase[] = [
  { name: 'burst over 1 s', traffic: [burst('eu', 1_100, START, 1_000)], durationMs: 20_000, target: () => 0.98 },
  { name: 'burst over 250 ms', traffic: [burst('eu', 1_100, START, 250)], durationMs: 20_000, target: () => 0.9 },
  {
    // 400 per region, one region after the other, 1.5 s apart (the seed's per-key case).
    name: 'sequential',
    traffic: sequential(START),
    durationMs: 20_000,
    target: () => 0.95,
  },
  { name: 'burst over 1 s, 45 s into the window', traffic: [burst('eu', 1_100, LATE, 1_000)], durationMs: 58_000, target: () => 0.98 },
  { name: 'sequential, 45 s into the window', traffic: sequential(LATE), durationMs: 58_000, target: () => 0.95 },
  // Everything in the same millisecond: nothing can move before it is decided, so what one region holds is the
  // most any scheme that does not wait can admit: a window base, floor((L + B)/3) = 350, or a bucket's
  // cap(u_r) = C/3 + floor(B/3) = 349.3 tokens.
  {
    name: 'instant burst',
    traffic: [burst('eu', 1_100, START, 1)],
    durationMs: 20_000,
    target: (algorithm) =>
      (algorithm === 'tokenBucket' ? Math.floor(LIMIT / 3 + Math.floor(BUDGET / 3)) : Math.floor((LIMIT + BUDGET) / 3)) / LIMIT,
  },
  // The same with rules[].maxWaitMs 250 (about two round trips): the requests beyond the region's share wait for
  // the idle regions' grant instead of a 429.
  { name: 'instant burst, maxWaitMs 250', traffic: [burst('eu', 1_100, START, 1)], durationMs: 20_000, target: () => 0.95, maxWaitMs: 250 },
  {
    name: 'burst over 250 ms, maxWaitMs 250',
    traffic: [burst('eu', 1_100, START, 250)],
    durationMs: 20_000,
    target: () => 0.98,
    maxWaitMs: 250,
  },
];

export interface SteadyCase {
  name: string;
  shape: TrafficShape;
  ratePerSec: number;
}

export const STEADY: SteadyCase[] = [
  { name: 'one region', shape: { kind: 'region', region: 'eu' }, ratePerSec: 20 },
  { name: 'one region', shape: { kind: 'region', region: 'eu' }, ratePerSec: 100 },
  { name: 'even', shape: { kind: 'even' }, ratePerSec: 20 },
  { name: 'even', shape: { kind: 'even' }, ratePerSec: 100 },
  { name: 'shifting', shape: { kind: 'shifting', everyMs: 20_000 }, ratePerSec: 20 },
  { name: 'shifting', shape: { kind: 'shifting', everyMs: 20_000 }, ratePerSec: 100 },
];

export const WINDOWS = 6;

export function steady(test: SteadyCase, algorithm: SimAlgorithm): Scenario {
  return healthy([{ key: 'k', ratePerSec: test.ratePerSec, shape: test.shape }], algorithm, WINDOWS * MINUTE);
}

/** Per full window (the first one included): federated admissions / exact admissions. */
export function windowRatios(result: SimResult): number[] {
  return result.stats.windows.filter((window) => window.window < WINDOWS).map((window) => window.admitted / window.exactAdmitted);
}

export function overallRatio(result: SimResult): number {
  const admitted = result.stats.windows.reduce((total, window) => total + window.admitted, 0);
  return admitted / result.stats.exactAdmitted;
}

export function runBurst(test: BurstCase, algorithm: SimAlgorithm, seed: number): SimResult {
  const scenario = healthy(test.traffic, algorithm, test.durationMs);
  return simulate(test.maxWaitMs ? { ...scenario, maxWaitMs: test.maxWaitMs } : scenario, seed);
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

// Latency recording for the benches: an HDR-style histogram from node:perf_hooks (nanosecond integers),
// summarised in milliseconds.
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

export interface LatencySummary {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
}

export interface LatencyRecorder {
  /**
   * Records the time since `startMs` (a performance.now() reading), as whole nanoseconds in a Number: recording
   * BigInts (process.hrtime.bigint() readings) cost the generator about 4 µs a call in a loaded process, paid by
   * every limiter it measures (docs/performance.md, hot path, fifteenth pass).
   */
  since(startMs: number): void;
  summary(): LatencySummary;
}

export function createLatencyRecorder(): LatencyRecorder {
  const histogram: RecordableHistogram = createHistogram({ lowest: 1, highest: 60_000_000_000, figures: 3 });
  return {
    since(startMs) {
      const elapsedNs = Math.round((performance.now() - startMs) * 1e6);
      histogram.record(elapsedNs > 0 ? elapsedNs : 1);
    },
    summary() {
      const ms = (ns: number) => Math.round((ns / 1e6) * 1000) / 1000;
      return {
        count: histogram.count,
        p50Ms: histogram.count ? ms(histogram.percentile(50)) : 0,
        p99Ms: histogram.count ? ms(histogram.percentile(99)) : 0,
        maxMs: histogram.count ? ms(histogram.max) : 0,
        meanMs: histogram.count ? ms(histogram.mean) : 0,
      };
    },
  };
}

export function round(value: number, digits = 2): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The least and the greatest of `values` (one comparison's per-round ratios), rounded to `digits`; undefined with
 * fewer than two finite values. A ratio read from one run of a shared machine moves from round to round: the
 * targets show this beside it.
 *
 * @example
 * spreadOf([1.5, 1.65, 1.4]); // [1.4, 1.65]
 */
export function spreadOf(values: readonly number[], digits = 2): [number, number] | undefined {
  const finite = values.filter((value) => Number.isFinite(value));
  if (finite.length < 2) return undefined;
  return [round(Math.min(...finite), digits), round(Math.max(...finite), digits)];
}

/**
 * A shown figure with its per-round spread after it (unchanged without one), as the target tables print it.
 *
 * @example
 * withSpread('1.16x (134.6 µs vs 116.1 µs)', [0.92, 1.44]); // '1.16x (134.6 µs vs 116.1 µs); rounds 0.92-1.44x'
 */
export function withSpread(shown: string, spread: readonly [number, number] | undefined): string {
  return spread === undefined ? shown : `${shown}; rounds ${spread[0]}-${spread[1]}x`;
}

/**
 * Records a ratio's per-round spread beside the ratio's figure `key`, as `<key>.low` and `<key>.high` (section 7
 * shows them); nothing when spreadOf has none.
 *
 * @example
 * recordSpread(ctx.figures, 'http.checkOverRlf', [0.61, 0.75]);
 */
export function recordSpread(figures: Record<string, number>, key: string, values: readonly number[]): void {
  const spread = spreadOf(values);
  if (spread === undefined) return;
  figures[`${key}.low`] = spread[0];
  figures[`${key}.high`] = spread[1];
}

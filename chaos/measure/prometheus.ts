// Quantiles from Prometheus histograms scraped from the regions' /metrics (text exposition format).
// Buckets of every label set and every region are added up, then the quantile is interpolated linearly
// inside its bucket, as PromQL's histogram_quantile does.

export interface HistogramBuckets {
  /** Upper bound → cumulative count. */
  buckets: Map<number, number>;
  count: number;
}

const BUCKET_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)_bucket\{(.*)\}\s+([0-9.eE+-]+|\+Inf|NaN)\s*$/;

/** Names of histograms on the page whose name matches `pattern`. */
export function histogramNames(text: string, pattern: RegExp): string[] {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const match = BUCKET_LINE.exec(line);
    if (match && pattern.test(match[1]!)) names.add(match[1]!);
  }
  return [...names];
}

export function readHistogram(text: string, name: string, into: HistogramBuckets = { buckets: new Map(), count: 0 }): HistogramBuckets {
  for (const line of text.split('\n')) {
    const match = BUCKET_LINE.exec(line);
    if (!match || match[1] !== name) continue;
    const le = /(?:^|,)le="([^"]+)"/.exec(match[2]!)?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    const value = Number(match[3]);
    into.buckets.set(bound, (into.buckets.get(bound) ?? 0) + value);
    if (bound === Number.POSITIVE_INFINITY) into.count += value;
  }
  return into;
}

/** The q-quantile (0..1) in the histogram's unit, or null when it holds no observations. */
export function histogramQuantile(histogram: HistogramBuckets, q: number): number | null {
  if (histogram.count === 0) return null;
  const bounds = [...histogram.buckets.keys()].sort((a, b) => a - b);
  const rank = q * histogram.count;
  let previousBound = 0;
  let previousCount = 0;
  for (const bound of bounds) {
    const cumulative = histogram.buckets.get(bound)!;
    if (cumulative >= rank) {
      // Past the last finite bucket the best answer is that bound, as in PromQL.
      if (bound === Number.POSITIVE_INFINITY) return previousBound;
      const inBucket = cumulative - previousCount;
      return inBucket === 0 ? bound : previousBound + ((bound - previousBound) * (rank - previousCount)) / inBucket;
    }
    previousBound = bound;
    previousCount = cumulative;
  }
  return previousBound;
}

// Reading a service's /metrics (Prometheus text format): the sum of a series over the label sets that match,
// and a histogram's quantile from its cumulative buckets.

/** Every sample of metric `name` as [labels, value]. */
export function samples(text: string, name: string): [Record<string, string>, number][] {
  const found: [Record<string, string>, number][] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    found.push([labels, Number(match[3])]);
  }
  return found;
}

/** The sum of metric `name` over the samples whose labels include every pair of `where`. */
export function sumOf(text: string, name: string, where: Record<string, string> = {}): number {
  return samples(text, name)
    .filter(([labels]) => Object.entries(where).every(([key, value]) => labels[key] === value))
    .reduce((sum, [, value]) => sum + value, 0);
}

/** Cumulative bucket counts by upper bound (le), summed over the matching label sets. */
export function histogramBuckets(text: string, name: string, where: Record<string, string> = {}): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const [labels, value] of samples(text, `${name}_bucket`)) {
    if (!Object.entries(where).every(([key, wanted]) => labels[key] === wanted)) continue;
    const le = labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + value);
  }
  return buckets;
}

/**
 * The q-quantile (0..1) of the observations made between two bucket readings: the upper bound of the first
 * bucket that holds it (so a bound, not an interpolation), or with `interpolate` a linear interpolation inside
 * that bucket as Prometheus's histogram_quantile does (the highest finite bound when it falls in +Inf); undefined
 * when nothing was observed.
 *
 * @example
 * quantileBetween(new Map(), new Map([[0.001, 90], [0.005, 100], [Infinity, 100]]), 0.99, true); // 0.0046
 */
export function quantileBetween(
  before: Map<number, number>,
  after: Map<number, number>,
  q: number,
  interpolate = false,
): number | undefined {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  const index = counts.findIndex((count) => count >= rank);
  const upper = bounds[index]!;
  if (!interpolate) return upper;
  const lower = index > 0 ? bounds[index - 1]! : 0;
  if (upper === Number.POSITIVE_INFINITY) return lower;
  const below = index > 0 ? counts[index - 1]! : 0;
  const inside = counts[index]! - below;
  return inside > 0 ? lower + ((upper - lower) * (rank - below)) / inside : upper;
}

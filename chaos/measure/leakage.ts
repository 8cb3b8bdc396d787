// Leakage: what the federation admitted beyond what the policy allows, per key.
// Window rule: per window, admitted − limit. Token bucket: over any interval [a, b] of admissions,
// admitted − (capacity + rate × (b − a)), the most a single exact bucket could have admitted there.
import type { Decision, LeakageResult } from '../types.ts';

function byKey(decisions: readonly Decision[]): Map<string, Decision[]> {
  const groups = new Map<string, Decision[]>();
  for (const decision of decisions) {
    let group = groups.get(decision.key);
    if (!group) groups.set(decision.key, (group = []));
    group.push(decision);
  }
  return groups;
}

export function windowLeakage(decisions: readonly Decision[], limit: number): LeakageResult {
  const counts = new Map<string, { key: string; window: number; admitted: number }>();
  for (const decision of decisions) {
    if (decision.outcome !== 'admitted') continue;
    const id = `${decision.key}\u0000${decision.window}`;
    const entry = counts.get(id) ?? { key: decision.key, window: decision.window, admitted: 0 };
    entry.admitted += 1;
    counts.set(id, entry);
  }
  let max = 0;
  let total = 0;
  let worst: LeakageResult['worst'] = null;
  for (const entry of counts.values()) {
    const excess = entry.admitted - limit;
    if (excess <= 0) continue;
    total += excess;
    if (excess > max) {
      max = excess;
      worst = { key: entry.key, window: entry.window };
    }
  }
  return { max, percent: (100 * max) / limit, total, worst };
}

/**
 * O(n) per key: excess(i, j) = (j − i + 1) − capacity − rate·(t_j − t_i)
 * = (j − rate·t_j) − (i − 1 − rate·t_i) − capacity, so keep the running minimum of (i − 1 − rate·t_i).
 * Times are the load generator's (midpoint of request and answer), so the result is floored: a sub-token
 * excess is timing noise, not leakage.
 */
export function bucketLeakage(decisions: readonly Decision[], capacity: number, ratePerMs: number): LeakageResult {
  let max = 0;
  let worst: LeakageResult['worst'] = null;
  for (const [key, group] of byKey(decisions)) {
    const times = group
      .filter((d) => d.outcome === 'admitted')
      .map((d) => d.t)
      .sort((a, b) => a - b);
    let best = Number.POSITIVE_INFINITY;
    let bestIndex = 0;
    for (let j = 0; j < times.length; j++) {
      const start = j - 1 - ratePerMs * times[j]!;
      if (start < best) {
        best = start;
        bestIndex = j;
      }
      const excess = Math.floor(j - ratePerMs * times[j]! - best - capacity + 1e-9);
      if (excess > max) {
        max = excess;
        worst = { key, fromMs: Math.round(times[bestIndex]!), toMs: Math.round(times[j]!) };
      }
    }
  }
  return { max, percent: (100 * max) / capacity, total: max, worst };
}

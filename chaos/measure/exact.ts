// An exact single global limiter replaying the merged trace: what one perfect limiter, seeing every region's
// requests in time order, would have admitted. Under-admission is what it admitted and the federation refused.
// Requests that got no answer (a dead service) are not replayed: that is unavailability, not a limiter's choice.
import type { Decision, UnderAdmission } from '../types.ts';

export type ExactVerdicts = Map<Decision, boolean>;

function answered(decisions: readonly Decision[]): Decision[] {
  return decisions.filter((d) => d.outcome !== 'error').sort((a, b) => a.t - b.t);
}

export function exactWindow(decisions: readonly Decision[], limit: number): ExactVerdicts {
  const used = new Map<string, number>();
  const verdicts: ExactVerdicts = new Map();
  for (const decision of answered(decisions)) {
    const id = `${decision.key}\u0000${decision.window}`;
    const count = used.get(id) ?? 0;
    const admit = count + 1 <= limit;
    if (admit) used.set(id, count + 1);
    verdicts.set(decision, admit);
  }
  return verdicts;
}

export function exactBucket(decisions: readonly Decision[], capacity: number, ratePerMs: number): ExactVerdicts {
  const buckets = new Map<string, { tokens: number; at: number }>();
  const verdicts: ExactVerdicts = new Map();
  for (const decision of answered(decisions)) {
    const bucket = buckets.get(decision.key) ?? { tokens: capacity, at: decision.t };
    bucket.tokens = Math.min(capacity, bucket.tokens + (decision.t - bucket.at) * ratePerMs);
    bucket.at = decision.t;
    const admit = bucket.tokens >= 1;
    if (admit) bucket.tokens -= 1;
    buckets.set(decision.key, bucket);
    verdicts.set(decision, admit);
  }
  return verdicts;
}

export function underAdmission(verdicts: ExactVerdicts): UnderAdmission {
  let refused = 0;
  let exactAdmitted = 0;
  for (const [decision, admit] of verdicts) {
    if (!admit) continue;
    exactAdmitted += 1;
    if (decision.outcome === 'limited') refused += 1;
  }
  return { refused, exactAdmitted, percent: exactAdmitted === 0 ? 0 : (100 * refused) / exactAdmitted };
}

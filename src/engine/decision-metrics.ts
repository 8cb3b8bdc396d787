// The decision metrics, recorded once per decision by the resilient engine, so every front end (gateway,
// /v1/check, the embedded middleware) is observed the same way.
import { decisionsTally, degradedAdmissionsTotal, nearLimitTally, peeksTotal } from '../metrics.ts';
import { quotaRemainingOf, type Decision } from './types.ts';

/**
 * Counts each outcome by rule, endpoint, verdict and source; near-limit admissions; degraded admissions. A peek
 * (nothing spent) is counted apart, in quotafed_peeks_total, so the decision counters stay what was decided.
 */
export function recordDecision(decision: Decision, endpoint: string, peek = false): void {
  if (peek) {
    for (const outcome of decision.outcomes) peeksTotal.inc({ rule: outcome.rule, outcome: outcome.allowed ? 'allowed' : 'limited' });
    return;
  }
  for (const outcome of decision.outcomes) {
    const verdict = outcome.allowed ? 'allowed' : outcome.shadow ? 'shadow_limited' : 'limited';
    decisionsTally.add({ rule: outcome.rule, endpoint, outcome: verdict, source: outcome.source });
    // Of the rule's limit, as the headers count it: in a federation the federation's remaining quota (this region's
    // own `remaining` is of its share, and would read "near" at a fifth of the limit used).
    if (outcome.allowed && outcome.limit > 0 && outcome.limit - quotaRemainingOf(outcome) >= 0.8 * outcome.limit)
      nearLimitTally.add({ rule: outcome.rule });
  }
  if (decision.allowed) {
    const degradedSource = decision.outcomes.find((o) => o.source === 'fail-open' || o.source === 'local-fallback')?.source;
    if (degradedSource) degradedAdmissionsTotal.inc({ mode: degradedSource });
  }
}

// What is decided when Redis did not decide. A `failMode: closed` rule is rejected, always: only Redis can prove
// a request is within quota. A `failMode: open` rule is admitted, or, when it uses the local fallback, decided in
// memory against this instance's share: from the first failed or timed-out decision, whether or not the breaker
// has opened yet, so every degraded admission of such a rule is counted.
import type { Config, Rule } from '../config/schema.ts';
import type { LocalFallback } from './local-fallback.ts';
import { bindingOutcome } from './redis-engine.ts';
import { outcomeBase } from './rules.ts';
import type { Decision, Lease, MatchedRule, RuleOutcome } from './types.ts';

/** A `failMode: open` rule decided by the local fallback when Redis does not decide (never a closed rule). */
function usesFallback(rule: Rule, settings: Config['breaker']): boolean {
  return rule.failMode === 'open' && (rule.localFallback ?? settings.localFallback);
}

export interface DegradedInput {
  matched: readonly MatchedRule[];
  cost: number;
  /** Epoch ms of the decision. */
  at: number;
  settings: Config['breaker'];
  local: LocalFallback;
  /** Only the answer: the local fallback counts nothing (RequestContext.peek). */
  peek?: boolean | undefined;
}

/** The decision of the fail modes (and the local fallback) for rules Redis did not decide. */
export function degradedDecision({ matched, cost, at, settings, local, peek }: DegradedInput): Decision {
  const waitMs = Math.max(1_000, settings.probeIntervalMs * settings.successThreshold);
  const fallbackInputs = matched.filter((entry) => usesFallback(entry.rule, settings));
  const fixed: (RuleOutcome | undefined)[] = matched.map(({ rule }) => {
    if (fallbackInputs.length > 0 && usesFallback(rule, settings)) return undefined;
    const base = outcomeBase(rule);
    return rule.failMode === 'open'
      ? { ...base, allowed: true, remaining: base.limit, resetAtMs: at + rule.period, retryAfterMs: 0, source: 'fail-open' as const }
      : { ...base, allowed: false, remaining: 0, resetAtMs: at + waitMs, retryAfterMs: waitMs, source: 'fail-closed' as const };
  });
  let leases: Lease[] = [];
  let outcomes: RuleOutcome[];
  if (fallbackInputs.length === 0) {
    outcomes = fixed as RuleOutcome[];
  } else {
    // A request a closed rule rejects anyway consumes nothing locally.
    const rejected = fixed.some((o) => o !== undefined && !o.allowed && !o.shadow);
    const result = local.decide(fallbackInputs, cost, at, !rejected && peek !== true);
    leases = rejected || peek === true ? [] : result.leases;
    let next = 0;
    outcomes = fixed.map((o) => o ?? result.outcomes[next++]!);
  }
  const allowed = outcomes.every((o) => o.allowed || o.shadow);
  return { allowed, outcomes, binding: bindingOutcome(outcomes), leases: allowed ? leases : [] };
}

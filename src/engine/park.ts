// Opt-in waiting (rules[].maxWaitMs): a request denied only because this region's share ran out while the
// federation has room (a false denial) is decided again for up to the rule's maxWaitMs, while the denial's fast
// lane carries the key's state to the peers and their grant comes back. Nothing else ever waits.
import type { Rule } from '../config/schema.ts';
import type { Decision } from './types.ts';

/** First re-decision after this many ms, then twice as long each time, at most PARK_POLL_MAX_MS apart. */
const PARK_POLL_FIRST_MS = 5;
const PARK_POLL_MAX_MS = 20;

/**
 * How long this denied decision may wait (ms), or 0: only when every enforcing rule that denied it was a false
 * denial and allows waiting (the shortest maxWaitMs of them). A true denial (the federation is at the limit, a
 * fenced window, a non-federated rule) is answered at once.
 */
export function parkBudgetMs(decision: Decision, rulesByName: ReadonlyMap<string, Rule>): number {
  if (decision.allowed) return 0;
  let budget = Number.POSITIVE_INFINITY;
  for (const outcome of decision.outcomes) {
    if (outcome.allowed || outcome.shadow) continue;
    const wait = rulesByName.get(outcome.rule)?.maxWaitMs ?? 0;
    if (!outcome.falseDenial || outcome.source !== 'redis' || wait <= 0) return 0;
    budget = Math.min(budget, wait);
  }
  return Number.isFinite(budget) ? budget : 0;
}

/** The pause before re-decision number `attempt` (0-based), never past `left` ms. */
export function parkPauseMs(attempt: number, left: number): number {
  return Math.max(0, Math.min(PARK_POLL_FIRST_MS * 2 ** attempt, PARK_POLL_MAX_MS, left));
}

// Which answered requests a rule counts (rules[].countResponses): every one, only those the upstream failed (400
// and above, or no answer: 502, 504), or only those it served (below 400). An admission a rule does not count is
// refunded when the answer is known (DecisionEngine.settleResponse).
import type { Rule } from '../config/schema.ts';

/** Whether `rule` counts a request answered with `status`. */
export function countsResponse(rule: Pick<Rule, 'countResponses'>, status: number): boolean {
  if (rule.countResponses === 'all') return true;
  const failed = status >= 400;
  return rule.countResponses === 'failed' ? failed : !failed;
}

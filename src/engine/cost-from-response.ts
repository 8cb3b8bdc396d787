// Cost after the fact (rules[].costFromResponse): a rule reserves its `reserve` at admission and, once the answer
// is known, keeps what the answer reports it cost (a header such as x-tokens-used, or the `cost` a decision-API
// caller reports to /v1/release) and refunds the rest through refund.lua. Never more than the reserve is charged:
// what the window admitted is what it counted, so the leakage bound is the one of any fixed cost.
import type { Rule } from '../config/schema.ts';
import { countsResponse } from './count-responses.ts';

/**
 * What an answer reports a request of a costFromResponse rule cost: the header's value, or the caller's report;
 * undefined when it reports nothing usable (missing or garbled).
 */
export type ReportedCost = (rule: Rule) => number | undefined;

/** How a cost report for a costFromResponse rule turned out (quotafed_response_costs_total's `outcome`). */
export type CostOutcome = 'reported' | 'missing' | 'overrun';

/** What to refund of one rule's admission once its answer is known, and how the cost report turned out. */
export interface RuleSettlement {
  /** Units to give back (0: the admission stays charged as it was). */
  refund: number;
  /** For costFromResponse rules whose answer the rule counts. */
  outcome?: CostOutcome;
  /** The reported cost, when there was one. */
  actual?: number;
}

/**
 * The units a rule charges a request at admission: its costFromResponse reserve, else the request's own cost.
 *
 * @example
 * ```ts
 * chargedCost({ costFromResponse: { header: 'x-tokens-used', reserve: 100 } }, 1); // 100
 * chargedCost({}, 3); // 3
 * ```
 */
export function chargedCost(rule: Pick<Rule, 'costFromResponse'>, requestCost: number): number {
  return rule.costFromResponse?.reserve ?? requestCost;
}

/** Whether a rule's admissions are settled once the answer is known (a refund ticket is needed). */
export function settlesAfterAnswer(rule: Pick<Rule, 'countResponses' | 'costFromResponse'>): boolean {
  return rule.countResponses !== 'all' || rule.costFromResponse !== undefined;
}

/**
 * A cost header's value as a cost: a non-negative decimal integer (surrounding blanks allowed), else undefined.
 *
 * @example
 * ```ts
 * parseReportedCost('42'); // 42
 * parseReportedCost('4.2'); // undefined
 * parseReportedCost(null); // undefined
 * ```
 */
export function parseReportedCost(value: string | readonly string[] | null | undefined): number | undefined {
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  if (!/^\d{1,15}$/.test(trimmed)) return undefined;
  return Number(trimmed);
}

/**
 * What to refund of an admission of `rule` that charged `charged` units, for an answer with `status` and the cost
 * it reports: everything when the rule does not count the answer (countResponses); for costFromResponse,
 * `reserve - min(actual, reserve)`, nothing when no cost was reported (the reserve is charged).
 *
 * @example
 * ```ts
 * const rule = Rule.parse({ name: 'tokens', limit: 1000, costFromResponse: { header: 'x-tokens-used', reserve: 100 } });
 * ruleSettlement(rule, 100, 200, () => 30); // { refund: 70, outcome: 'reported', actual: 30 }
 * ruleSettlement(rule, 100, 200, () => undefined); // { refund: 0, outcome: 'missing' }
 * ```
 */
export function ruleSettlement(rule: Rule, charged: number, status: number, reported: ReportedCost | undefined): RuleSettlement {
  if (!countsResponse(rule, status)) return { refund: charged };
  if (rule.costFromResponse === undefined) return { refund: 0 };
  const actual = reported?.(rule);
  if (actual === undefined) return { refund: 0, outcome: 'missing' };
  if (actual > charged) return { refund: 0, outcome: 'overrun', actual };
  return { refund: charged - actual, outcome: 'reported', actual };
}

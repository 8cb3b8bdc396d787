// The response contract: the one builder of the rate-limit headers every HTTP answer carries (the gateway, the
// middleware, /v1/check and /v1/auth).
//
//   X-RateLimit-Limit / -Remaining / -Reset   the binding (most restrictive) rule. Limit is the rule's limit for
//                                             the whole federation; Remaining is the federation's remaining quota
//                                             as this region's view has it (what one exact global limiter would
//                                             say, up to sync lag), never less than this region can admit now
//                                             (RuleOutcome.quotaRemaining; one region: exact). Reset is the number
//                                             of SECONDS UNTIL that rule is fully available again (a window's end,
//                                             a token bucket full again), like the draft's `t`; not an epoch
//                                             timestamp.
//   RateLimit-Policy: "per-key";q=1000;w=60, "search";q=100;w=60
//                                             every matched (non-shadow) rule, binding first: q units per w seconds
//                                             (draft-ietf-httpapi-ratelimit-headers). For a token bucket q is its
//                                             refill per period (the sustained rate), not its burst capacity.
//   RateLimit: "per-key";r=998;t=1, "search";r=42;t=17
//                                             remaining units (Remaining's count) and seconds until full, per
//                                             rule that counted.
//   X-RateLimit-Degraded: fail-open | local-fallback
//                                             Redis did not decide. fail-open: nothing was counted, so no remaining
//                                             count is reported for that rule; local-fallback: counted in this
//                                             instance's memory against its share only.
// No rule, no headers.
import { DEFAULT_DENIAL_BODY, type Rule } from '../config/schema.ts';
import { quotaRemainingOf, type Decision, type RuleOutcome } from '../engine/types.ts';

/** The seed's 429 body (a rule's `denial` may answer another: src/http/denial.ts). */
export const RATE_LIMITED_BODY = DEFAULT_DENIAL_BODY;

/** The header that marks an answer Redis did not decide. */
export const DEGRADED_HEADER = 'X-RateLimit-Degraded';

/** The status of a request whose cost exceeds a rule's limit: it can never be admitted, so no Retry-After. */
export const COST_EXCEEDS_LIMIT_STATUS = 422;

/**
 * The configured rule behind an outcome, by name: what a token bucket's policy states (its refill per period), and
 * the rule's own denial answer.
 */
export type RuleLookup = (name: string) => Pick<Rule, 'algorithm' | 'limit' | 'period' | 'denial'> | undefined;

/** A RuleLookup over the rules in force; `rules` is read at every call, so a policy reload is followed. */
export function ruleLookup(rules: () => readonly Rule[]): (name: string) => Rule | undefined {
  let seen: readonly Rule[] | undefined;
  let byName = new Map<string, Rule>();
  return (name) => {
    const current = rules();
    if (current !== seen) {
      seen = current;
      byName = new Map(current.map((rule) => [rule.name, rule]));
    }
    return byName.get(name);
  };
}

export interface HeaderOptions {
  /** Rules by name; without it a token bucket's policy states its capacity per period. */
  rules?: RuleLookup | undefined;
}

type Decided = Pick<Decision, 'allowed' | 'binding'> & { outcomes?: readonly RuleOutcome[] };

/** Whole seconds from `nowMs` until `epochMs`, at least 0 (X-RateLimit-Reset, the draft's `t`). */
export function secondsUntil(epochMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil((epochMs - nowMs) / 1000));
}

/** Retry-After in whole seconds, never 0: a client told "0" retries at once and meets the same denial. */
export function retryAfterSeconds(binding: RuleOutcome, nowMs: number): number {
  const waitMs = binding.retryAfterMs > 0 ? binding.retryAfterMs : binding.resetAtMs - nowMs;
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/**
 * The remaining whole units the headers report for an outcome: the federation's remaining quota as this region
 * sees it (quotaRemainingOf); undefined when nothing was counted (fail-open).
 */
export function remainingOf(outcome: RuleOutcome): number | undefined {
  return outcome.source === 'fail-open' ? undefined : Math.max(0, Math.floor(quotaRemainingOf(outcome)));
}

/** What this region can still admit for an outcome, in whole units (RuleOutcome.remaining); undefined when nothing was counted (fail-open). */
export function regionRemainingOf(outcome: RuleOutcome): number | undefined {
  return outcome.source === 'fail-open' ? undefined : Math.max(0, Math.floor(outcome.remaining));
}

/** How Redis was bypassed for this decision, if it was: fail-open wins over local-fallback. */
export function degradedSource(decision: Decided): 'fail-open' | 'local-fallback' | undefined {
  const outcomes = decision.outcomes ?? (decision.binding ? [decision.binding] : []);
  let found: 'fail-open' | 'local-fallback' | undefined;
  for (const outcome of outcomes) {
    if (outcome.shadow) continue;
    if (outcome.source === 'fail-open') return 'fail-open';
    if (outcome.source === 'local-fallback') found = 'local-fallback';
  }
  return found;
}

/** The matched rules the policy fields list: non-shadow, binding first, each once. */
function listed(decision: Decided): RuleOutcome[] {
  const binding = decision.binding;
  if (!binding) return [];
  const out = [binding];
  for (const outcome of decision.outcomes ?? []) {
    if (outcome.shadow || outcome === binding || out.some((o) => o.rule === outcome.rule)) continue;
    out.push(outcome);
  }
  return out;
}

/** `"name";q=..;w=..` of one outcome: a token bucket states its refill per period, every other rule its limit. */
function policyItem(outcome: RuleOutcome, rules: RuleLookup | undefined): string {
  const rule = outcome.algorithm === 'tokenBucket' ? rules?.(outcome.rule) : undefined;
  const quota = rule ? rule.limit : outcome.limit;
  const window = Math.max(1, Math.ceil((rule ? rule.period : outcome.periodMs) / 1000));
  return `"${outcome.rule}";q=${quota};w=${window}`;
}

/** A header's list with one more item (`a, b`). */
function joinItem(list: string, item: string): string {
  return list === '' ? item : `${list}, ${item}`;
}

/** The rate-limit headers of a decision (see the top of this file); no rule, no headers. */
export function rateLimitHeaders(decision: Decided, nowMs: number, options: HeaderOptions = {}): Record<string, string> {
  const binding = decision.binding;
  if (!binding) return {};
  const headers: Record<string, string> = { 'X-RateLimit-Limit': String(binding.limit) };
  const remaining = remainingOf(binding);
  if (remaining !== undefined) {
    headers['X-RateLimit-Remaining'] = String(remaining);
    headers['X-RateLimit-Reset'] = String(secondsUntil(binding.resetAtMs, nowMs));
  }
  // Joined as they are built: map, flatMap and join cost a /v1/check request about 0.7 µs (docs/performance.md).
  let policy = '';
  let counted = '';
  for (const o of listed(decision)) {
    policy = joinItem(policy, policyItem(o, options.rules));
    const r = remainingOf(o);
    if (r !== undefined) counted = joinItem(counted, `"${o.rule}";r=${r};t=${secondsUntil(o.resetAtMs, nowMs)}`);
  }
  headers['RateLimit-Policy'] = policy;
  if (counted !== '') headers.RateLimit = counted;
  const degraded = degradedSource(decision);
  if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded;
  if (!decision.allowed) headers['Retry-After'] = String(retryAfterSeconds(binding, nowMs));
  return headers;
}

/**
 * The rule a request can never pass: a denying, non-shadow rule whose limit (a bucket's capacity, a window's
 * limit, a concurrency rule's slots) is below the request's cost. Waiting does not help, so no Retry-After.
 */
export function costExceedsLimit(decision: Pick<Decision, 'allowed' | 'outcomes'>, cost: number): RuleOutcome | undefined {
  if (decision.allowed || cost <= 1) return undefined;
  return decision.outcomes.find((o) => !o.allowed && !o.shadow && cost > o.limit);
}

/** The reason given for a request costlier than a rule's limit. */
export function costExceedsLimitReason(outcome: RuleOutcome, cost: number): string {
  return `cost ${cost} exceeds the limit ${outcome.limit} of rule "${outcome.rule}": this request can never be admitted`;
}

/** The answer to a request costlier than a rule's limit: 422, the reason, the rate-limit headers, no Retry-After. */
export function costExceedsLimitResponse(
  decision: Decision,
  outcome: RuleOutcome,
  cost: number,
  nowMs: number,
  options?: HeaderOptions,
): Response {
  const headers = new Headers(rateLimitHeaders(decision, nowMs, options));
  headers.delete('Retry-After');
  headers.set('Content-Type', 'application/json');
  const body = JSON.stringify({ error: costExceedsLimitReason(outcome, cost), rule: outcome.rule, limit: outcome.limit, cost });
  return new Response(body, { status: COST_EXCEEDS_LIMIT_STATUS, headers });
}

export function applyHeaders(target: Headers, headers: Record<string, string>): void {
  // A plain record of strings (rateLimitHeaders'): its own keys, without the entries' arrays.
  for (const name in headers) target.set(name, headers[name]!);
}

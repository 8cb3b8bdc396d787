// The answers to a refused request, for the HTTP ways in (gateway, middleware, /v1/auth):
//   over a rule's limit   the binding rule's `denial` (status, body template, content type), else 429 with the
//                         seed's {"error":"Rate limit exceeded"}; the rate-limit headers and Retry-After either way
//   on the deny list      403 {"error":"Forbidden","reason":...,"list":"deny","kind":"apiKey"|"ip"} and
//                         X-Quotafed-List: deny (nginx tells the two 403s of /v1/auth apart by it)
// /v1/check keeps its JSON decision body (src/http/check.ts) and says `status` instead.
import { DEFAULT_DENIAL_BODY, type Denial, type Rule } from '../config/schema.ts';
import type { Decision, DecisionEngine, ListVerdict, RuleOutcome } from '../engine/types.ts';
import {
  rateLimitHeaders,
  remainingOf,
  retryAfterSeconds,
  ruleLookup,
  secondsUntil,
  type HeaderOptions,
  type RuleLookup,
} from './headers.ts';

/** The header that names the list which decided a request (`deny` on a list's 403, `allow` on /v1/auth's 204). */
export const LIST_HEADER = 'X-Quotafed-List';

/** The status of a caller on the deny list. */
export const LIST_DENIED_STATUS = 403;

/** What a denied request is answered: status, body and content type. */
export interface DenialAnswer {
  status: number;
  body: string;
  contentType: string;
}

export const DEFAULT_DENIAL: DenialAnswer = { status: 429, body: DEFAULT_DENIAL_BODY, contentType: 'application/json' };

/** The reason a deny-list answer gives: which kind of entry matched, never the entry itself. */
export function listDeniedReason(verdict: ListVerdict): string {
  return verdict.kind === 'apiKey' ? 'this API key is on the deny list' : 'this client address is on the deny list';
}

/** The JSON body of a deny-list answer. */
export function listDeniedBody(verdict: ListVerdict): string {
  return JSON.stringify({ error: 'Forbidden', reason: listDeniedReason(verdict), list: 'deny', kind: verdict.kind });
}

/**
 * The 403 of a caller on the deny list: a JSON reason, X-Quotafed-List: deny, no rate-limit headers (no rule was asked).
 *
 * @example
 * ```ts
 * if (decision.list?.list === 'deny') return listDeniedResponse(decision.list);
 * ```
 */
export function listDeniedResponse(verdict: ListVerdict): Response {
  return new Response(listDeniedBody(verdict), {
    status: LIST_DENIED_STATUS,
    headers: { 'Content-Type': 'application/json', [LIST_HEADER]: 'deny' },
  });
}

/** `{rule}`, `{limit}`, … of a denial body, from the binding outcome (every value a number or the rule's name). */
function placeholders(binding: RuleOutcome, status: number, nowMs: number): Record<string, string> {
  return {
    rule: binding.rule,
    limit: String(binding.limit),
    remaining: String(remainingOf(binding) ?? 0),
    retryAfter: String(retryAfterSeconds(binding, nowMs)),
    reset: String(secondsUntil(binding.resetAtMs, nowMs)),
    status: String(status),
  };
}

/**
 * Fills in a denial's body template for one answer.
 *
 * @example
 * ```ts
 * renderDenial({ status: 429, contentType: 'application/problem+json', body: '{"rule":"{rule}","retryAfter":{retryAfter}}' }, binding, Date.now());
 * // { status: 429, contentType: 'application/problem+json', body: '{"rule":"checkout","retryAfter":37}' }
 * ```
 */
export function renderDenial(denial: Denial, binding: RuleOutcome, nowMs: number): DenialAnswer {
  const values = placeholders(binding, denial.status, nowMs);
  const body = denial.body.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (text, name: string) => values[name] ?? text);
  return { status: denial.status, body, contentType: denial.contentType };
}

/** The answer for a decision over a rule's limit: the binding rule's denial, or the default 429. */
export function denialOf(decision: Pick<Decision, 'binding'>, nowMs: number, rules: RuleLookup | undefined): DenialAnswer {
  const binding = decision.binding;
  const denial = binding ? rules?.(binding.rule)?.denial : undefined;
  return binding && denial ? renderDenial(denial, binding, nowMs) : DEFAULT_DENIAL;
}

/** The rules of an engine that exposes its config (the resilient engine), for a middleware not handed `rules`. */
export function rulesOfEngine(engine: DecisionEngine): RuleLookup | undefined {
  const withConfig = engine as DecisionEngine & { config?: { rules?: readonly Rule[] } };
  if (!Array.isArray(withConfig.config?.rules)) return undefined;
  // Read at every call: the resilient engine's config follows a policy reload.
  return ruleLookup(() => withConfig.config?.rules ?? []);
}

/**
 * The answer to a request over a rule's limit: the binding rule's denial (default 429 and the seed's body) with the
 * rate-limit headers and Retry-After.
 *
 * @example
 * ```ts
 * if (!decision.allowed) return rateLimitedResponse(decision, Date.now(), { rules, denials: rules });
 * ```
 */
export function rateLimitedResponse(
  decision: Pick<Decision, 'allowed' | 'binding' | 'outcomes'>,
  nowMs: number,
  options: HeaderOptions & { denials?: RuleLookup | undefined } = {},
): Response {
  const headers = new Headers(rateLimitHeaders(decision, nowMs, options));
  if (!headers.has('Retry-After')) headers.set('Retry-After', '1');
  const answer = denialOf(decision, nowMs, options.denials ?? options.rules);
  headers.set('Content-Type', answer.contentType);
  return new Response(answer.body, { status: answer.status, headers });
}

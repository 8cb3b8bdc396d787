// A ShouldRateLimit answer from quotafed decisions, shaped as envoyproxy/ratelimit answers: one status per
// descriptor (a descriptor no rule matched is OK without current_limit), OVER_LIMIT overall when any descriptor is
// over its limit, and the draft-03 X-RateLimit-* headers of the most limiting descriptor in
// response_headers_to_add (Envoy adds them to the 429 it sends, or to the upstream's answer):
//   X-RateLimit-Limit: 10, 10;w=60;name="checkout"    (limit, then the quota policy: window seconds, name)
//   X-RateLimit-Remaining: 0
//   X-RateLimit-Reset: 42                              (seconds until the window resets)
// Over the limit, Retry-After and the client-facing 429 body ({"error":"Rate limit exceeded"}, raw_body) too. A
// fail-open decision counted nothing: no Remaining / Reset, and x-ratelimit-degraded: fail-open instead. A caller on
// the deny list (src/engine/access-lists.ts) is OVER_LIMIT with the list's reason as the body. A descriptor an
// `unlimited` rule answers is OK with limit_remaining MaxUint32 and no current_limit, as envoyproxy/ratelimit
// answers it; it adds no headers.
import { quotaRemainingOf, type Decision, type RuleOutcome } from '../engine/types.ts';
import { LIST_HEADER, listDeniedBody } from '../http/denial.ts';
import { DEGRADED_HEADER, RATE_LIMITED_BODY, remainingOf, retryAfterSeconds } from '../http/headers.ts';
import { envoyUnitOf } from '../config/envoy-units.ts';
import type { DescriptorStatusMessage, RateLimitResponseMessage, Unit } from './messages.ts';

/** The RLS unit of a rule period; UNKNOWN when the period is not exactly one unit (the window is in the headers). */
export function unitOf(periodMs: number): Unit {
  return (envoyUnitOf(periodMs)?.toUpperCase() as Unit | undefined) ?? 'UNKNOWN';
}

/** A descriptor an `unlimited` rule answers: OK, nothing counted (envoyproxy/ratelimit's answer). */
export const UNLIMITED = Symbol('unlimited');
/** limit_remaining of an unlimited descriptor, as envoyproxy/ratelimit answers it (MaxUint32). */
export const UNLIMITED_REMAINING = 4_294_967_295;

/** Per descriptor: its decision, UNLIMITED, or undefined when no rule matched. */
export type DescriptorVerdict = Decision | typeof UNLIMITED | undefined;

/** The decision behind a verdict (none for an unlimited or unmatched descriptor). */
export function decidedBy(verdict: DescriptorVerdict): Decision | undefined {
  return verdict === UNLIMITED ? undefined : verdict;
}

function secondsUntil(epochMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil((epochMs - nowMs) / 1000));
}

/** A descriptor's status from its decision; `undefined` decision: no rule matched. */
export function descriptorStatus(decision: DescriptorVerdict, nowMs: number): DescriptorStatusMessage {
  if (decision === UNLIMITED) return { code: 'OK', current_limit: null, limit_remaining: UNLIMITED_REMAINING, duration_until_reset: null };
  // On the deny list: OVER_LIMIT (the RLS protocol has no "forbidden"), no limit to report.
  if (decision?.list?.list === 'deny') return { code: 'OVER_LIMIT', current_limit: null, limit_remaining: 0, duration_until_reset: null };
  const binding = decision?.binding;
  if (!decision || !binding) return { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null };
  return {
    code: decision.allowed ? 'OK' : 'OVER_LIMIT',
    current_limit: { name: binding.rule, requests_per_unit: binding.limit, unit: unitOf(binding.periodMs) },
    // The federation's remaining quota as this region sees it (the headers' count).
    limit_remaining: Math.max(0, Math.floor(quotaRemainingOf(binding))),
    duration_until_reset: { seconds: secondsUntil(binding.resetAtMs, nowMs), nanos: 0 },
  };
}

/** The outcome the headers describe: a denying descriptor's if any, else the one with the least quota remaining. */
function mostLimiting(decisions: ReadonlyArray<DescriptorVerdict>): { binding: RuleOutcome; allowed: boolean } | undefined {
  let chosen: { binding: RuleOutcome; allowed: boolean } | undefined;
  for (const decision of decisions) {
    if (!decision || decision === UNLIMITED || !decision.binding) continue;
    const binding = decision.binding;
    const candidate = { binding, allowed: decision.allowed };
    if (!chosen) chosen = candidate;
    else if (chosen.allowed && !candidate.allowed) chosen = candidate;
    else if (chosen.allowed === candidate.allowed && quotaRemainingOf(binding) < quotaRemainingOf(chosen.binding)) chosen = candidate;
  }
  return chosen;
}

export function rateLimitHeadersDraft03(binding: RuleOutcome, allowed: boolean, nowMs: number): Array<{ key: string; value: string }> {
  const window = Math.max(1, Math.ceil(binding.periodMs / 1000));
  const headers = [{ key: 'x-ratelimit-limit', value: `${binding.limit}, ${binding.limit};w=${window};name="${binding.rule}"` }];
  // A fail-open outcome counted nothing: no remaining count, and the answer says it is degraded (src/http/headers.ts).
  const remaining = remainingOf(binding);
  if (remaining === undefined) headers.push({ key: DEGRADED_HEADER.toLowerCase(), value: 'fail-open' });
  else
    headers.push(
      { key: 'x-ratelimit-remaining', value: String(remaining) },
      { key: 'x-ratelimit-reset', value: String(secondsUntil(binding.resetAtMs, nowMs)) },
    );
  if (!allowed) headers.push({ key: 'retry-after', value: String(retryAfterSeconds(binding, nowMs)) });
  return headers;
}

export function rateLimitResponse(decisions: ReadonlyArray<DescriptorVerdict>, nowMs: number, overLimit = false): RateLimitResponseMessage {
  const statuses = decisions.map((decision) => descriptorStatus(decision, nowMs));
  const over = overLimit || statuses.some((status) => status.code === 'OVER_LIMIT');
  const limiting = mostLimiting(decisions);
  const headers = limiting ? rateLimitHeadersDraft03(limiting.binding, limiting.allowed, nowMs) : [];
  if (over) headers.push({ key: 'content-type', value: 'application/json' });
  // A caller on the deny list gets the list's reason as the body of Envoy's answer (Envoy picks the status).
  const denied = decisions.map(decidedBy).find((decision) => decision?.list?.list === 'deny')?.list;
  if (denied) headers.push({ key: LIST_HEADER.toLowerCase(), value: 'deny' });
  const body = denied ? listDeniedBody(denied) : RATE_LIMITED_BODY;
  return {
    overall_code: over ? 'OVER_LIMIT' : 'OK',
    statuses,
    response_headers_to_add: headers,
    request_headers_to_add: [],
    raw_body: over ? Buffer.from(body) : Buffer.alloc(0),
  };
}

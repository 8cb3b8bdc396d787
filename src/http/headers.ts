// The response contract. X-RateLimit-Reset is the number of SECONDS UNTIL the binding rule is fully available
// again (like the IETF draft's `t`), not an epoch timestamp: it needs no clock agreement with the client.
import type { Decision, RuleOutcome } from '../engine/types.ts';

export const RATE_LIMITED_BODY = '{"error":"Rate limit exceeded"}';

function secondsUntil(epochMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil((epochMs - nowMs) / 1000));
}

/** Retry-After in whole seconds, never 0: a client told "0" retries at once and meets the same denial. */
export function retryAfterSeconds(binding: RuleOutcome, nowMs: number): number {
  const waitMs = binding.retryAfterMs > 0 ? binding.retryAfterMs : binding.resetAtMs - nowMs;
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/**
 * X-RateLimit-* plus the IETF draft fields (draft-ietf-httpapi-ratelimit-headers, structured-field form):
 *   RateLimit-Policy: "search";q=100;w=60     (quota, window seconds)
 *   RateLimit: "search";r=42;t=17             (remaining, seconds until reset)
 * All describe the binding (most restrictive) rule; no rule, no headers.
 */
export function rateLimitHeaders(decision: Pick<Decision, 'allowed' | 'binding'>, nowMs: number): Record<string, string> {
  const binding = decision.binding;
  if (!binding) return {};
  const remaining = Math.max(0, Math.floor(binding.remaining));
  const reset = secondsUntil(binding.resetAtMs, nowMs);
  const window = Math.max(1, Math.ceil(binding.periodMs / 1000));
  const headers: Record<string, string> = {
    'X-RateLimit-Limit': String(binding.limit),
    'X-RateLimit-Remaining': String(remaining),
    'X-RateLimit-Reset': String(reset),
    'RateLimit-Policy': `"${binding.rule}";q=${binding.limit};w=${window}`,
    RateLimit: `"${binding.rule}";r=${remaining};t=${reset}`,
  };
  if (!decision.allowed) headers['Retry-After'] = String(retryAfterSeconds(binding, nowMs));
  return headers;
}

/** The 429 answer: exact body, JSON content type, the binding rule's headers. */
export function rateLimitedResponse(decision: Pick<Decision, 'allowed' | 'binding'>, nowMs: number): Response {
  const headers = new Headers(rateLimitHeaders(decision, nowMs));
  headers.set('Content-Type', 'application/json');
  if (!headers.has('Retry-After')) headers.set('Retry-After', '1');
  return new Response(RATE_LIMITED_BODY, { status: 429, headers });
}

export function applyHeaders(target: Headers, headers: Record<string, string>): void {
  for (const [name, value] of Object.entries(headers)) target.set(name, value);
}

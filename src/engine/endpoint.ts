// The `endpoint` label of the metrics: the route pattern a request is counted under.
import { OTHER_ENDPOINT } from '../metrics.ts';
import type { MatchedRule } from './rules.ts';
import type { Decision } from './types.ts';

/** A decision as the resilient engine returns it: stamped with the endpoint it was counted under. */
export type EndpointDecision = Decision & { endpoint?: string };

/**
 * The route pattern of the first endpoint-scoped rule that matched, or OTHER_ENDPOINT. Given the matched rules it
 * computes it (the resilient engine, which stamps it on its decision); given a decision it reads that stamp back
 * (the middleware, counting a 429).
 */
export function endpointOf(from: readonly MatchedRule[] | EndpointDecision): string {
  if ('outcomes' in from) return from.endpoint ?? OTHER_ENDPOINT;
  return from.find((m) => m.endpoint !== undefined)?.endpoint ?? OTHER_ENDPOINT;
}

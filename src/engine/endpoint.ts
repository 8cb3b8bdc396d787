// The `endpoint` label of the metrics: the route pattern a request is counted under.
import { OTHER_ENDPOINT } from '../metrics.ts';
import type { Decision, MatchedRule, ObservedDecision } from './types.ts';

/**
 * The route pattern of the first endpoint-scoped rule that matched, or OTHER_ENDPOINT. Given the matched rules it
 * computes it (the resilient engine, which stamps it on its decision); given a decision it reads that stamp back
 * (the middleware, counting a 429).
 */
export function endpointOf(from: readonly MatchedRule[] | Decision): string {
  if ('outcomes' in from) return (from as Partial<ObservedDecision>).endpoint ?? OTHER_ENDPOINT;
  return from.find((m) => m.endpoint !== undefined)?.endpoint ?? OTHER_ENDPOINT;
}

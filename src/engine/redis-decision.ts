// One decision by the region's Redis under a deadline. A store failure (Redis down, past the deadline) is
// counted, decided by the fail modes, then counted toward opening the breaker; a success closes the books on
// a failed settlement of the local fallback.
import { performance } from 'node:perf_hooks';
import type { Config } from '../config/schema.ts';
import { withDeadline } from '../deadline.ts';
import type { Logger } from '../log.ts';
import { redisCommandSeconds, redisErrorsTotal } from '../metrics.ts';
import type { Breaker } from './breaker.ts';
import { errorKind, isStoreFailure } from './errors.ts';
import type { FallbackSettlement } from './fallback-settlement.ts';
import { asMatchedDecider, type EngineInUse } from './inner-engine.ts';
import type { Decision, MatchedRule, RequestContext } from './types.ts';

/**
 * The default bound on one inner decision, on top of the client's command timeout: two command timeouts and
 * 25 ms, for decisions that take more than one round trip (a refund on a cluster) and any path that escapes the
 * client timeout.
 */
export function defaultDecisionDeadlineMs(config: Config): number {
  return 2 * config.redis.commandTimeoutMs + 25;
}

export interface RedisDecisionContext {
  /** Read at each decision: the rules and inner engine in force. */
  current: Readonly<EngineInUse>;
  deadlineMs: number;
  breaker: Breaker;
  settlement: FallbackSettlement;
  log: Logger;
  /** The decision when Redis did not decide (the fail modes under the breaker state the request met). */
  degraded: (matched: readonly MatchedRule[], request: RequestContext) => Decision;
}

/** Decides `matched` in Redis, or by the fail modes when the store fails; other errors are thrown. */
export async function decideByRedis(
  context: RedisDecisionContext,
  matched: readonly MatchedRule[],
  request: RequestContext,
  /** Adds the time spent on Redis to `redisMs` (a traced decision). */
  timing?: { redisMs: number },
): Promise<Decision> {
  const { current, breaker, log } = context;
  const callStarted = performance.now();
  /** Whether this decision went to Redis (an answer from memory is no round trip, and is not timed as one). */
  let roundTrip = false;
  try {
    // The rules matched by the caller are the inner engine's own when it was built from this config.
    const decider = asMatchedDecider(current.inner);
    const own = decider !== undefined && decider.rules === current.config.rules ? decider : undefined;
    // An answer from the over-limit cache (or a local lease) needs no deadline (no timer per denied request).
    const hit = own?.cached?.(matched, request);
    if (hit !== undefined) return hit;
    roundTrip = true;
    const decision = await withDeadline(
      own ? own.decideMatched(matched, request) : current.inner.decide(request),
      context.deadlineMs,
      'decision',
    );
    breaker.recordSuccess();
    context.settlement.retryIfFailed();
    return decision;
  } catch (error) {
    if (!isStoreFailure(error)) throw error;
    redisErrorsTotal.inc({ command: 'decide', kind: errorKind(error) });
    log.debug({ event: 'decide.failed', error: (error as Error).message }, 'Redis decision failed; fail mode decides');
    // Decided under the state the request met (closed: fail modes), then counted toward opening.
    const decision = context.degraded(matched, request);
    breaker.recordFailure(error);
    return decision;
  } finally {
    if (roundTrip) {
      const elapsedMs = performance.now() - callStarted;
      redisCommandSeconds.observe({ command: 'decide' }, elapsedMs / 1000);
      if (timing !== undefined) timing.redisMs += elapsedMs;
    }
  }
}

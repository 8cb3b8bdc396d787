// Wraps the Redis decision engine with the outage policy: a bounded wait per decision, a circuit breaker,
// and what to do instead of Redis (each rule's fail mode, or the in-memory local fallback while the breaker
// is open). It also records the decision metrics, so every front end (gateway, /v1/check, the embedded
// middleware) is observed the same way.
import { performance } from 'node:perf_hooks';
import { FEDERATED_ALGORITHMS, type Config, type Rule } from '../config/schema.ts';
import { DeadlineExceededError, withDeadline } from '../deadline.ts';
import { scriptBudget, topologyOf } from '../federation/topology.ts';
import type { Logger } from '../log.ts';
import {
  decisionsTotal,
  degradedAdmissionsTotal,
  fallbackSettledTotal,
  limiterOverheadSeconds,
  nearLimitTotal,
  parkedTotal,
  redisCommandSeconds,
  redisErrorsTotal,
} from '../metrics.ts';
import { createBreaker, type Breaker } from './breaker.ts';
import { endpointOf } from './endpoint.ts';
import { StoreUnavailableError, errorMessage } from './errors.ts';
import { createLocalFallback, type LocalFallback, type Unsettled } from './local-fallback.ts';
import { bindingOutcome } from './redis-engine.ts';
import { createParkingLot, parkBudgetMs, parkSignature } from './park.ts';
import { matchRules, outcomeBase } from './rules.ts';
import type { Decision, DecisionEngine, Lease, MatchedRule, ObservedDecision, RequestContext, RuleOutcome } from './types.ts';

export interface ResilientEngine extends DecisionEngine {
  decide(request: RequestContext): Promise<ObservedDecision>;
  readonly breaker: Breaker;
  /** The rules in force (they change on a policy reload). */
  readonly config: Config;
  /**
   * Policy reload: decide with new rules and a new inner engine from the next request on. The breaker and the
   * local fallback stay (an outage in progress stays an outage); in-flight decisions finish on the old engine.
   */
  swap(next: { config: Config; inner: DecisionEngine }): Promise<void>;
}

export interface ResilientEngineOptions {
  config: Config;
  inner: DecisionEngine;
  /** Health check used by the open breaker (PING); must be bounded by the command timeout. */
  probe: () => Promise<unknown>;
  logger: Logger;
  /** Most keys the local fallback holds. */
  localCapacity?: number;
  /**
   * Upper bound on one inner decision, on top of the client's command timeout. The Redis client already
   * times out each command; this guards decisions that take more than one round trip (a refund on a
   * cluster) and any path that escapes the client timeout.
   */
  decisionDeadlineMs?: number;
  now?: () => number;
}

/** An inner engine that decides rules matched by the caller (the Redis engine), so they are matched once. */
interface MatchedDecider {
  readonly rules: readonly Rule[];
  decideMatched(matched: readonly MatchedRule[], request: RequestContext): Promise<Decision>;
  /** The answer decideMatched would give from memory (the over-limit cache), if any. */
  cached?(matched: readonly MatchedRule[], request: RequestContext): Decision | undefined;
}

/** An inner engine that can write local-fallback admissions into Redis (the Redis engine). */
interface Settler {
  settle(items: readonly Unsettled[]): Promise<void>;
}

function settler(engine: DecisionEngine): Settler | undefined {
  const candidate = engine as Partial<Settler>;
  return typeof candidate.settle === 'function' ? (candidate as Settler) : undefined;
}

function matchedDecider(engine: DecisionEngine): MatchedDecider | undefined {
  const candidate = engine as Partial<MatchedDecider>;
  return typeof candidate.decideMatched === 'function' && candidate.rules !== undefined ? (candidate as MatchedDecider) : undefined;
}

function isStoreFailure(error: unknown): boolean {
  return error instanceof StoreUnavailableError || error instanceof DeadlineExceededError;
}

function errorKind(error: unknown): 'timeout' | 'unavailable' {
  const text =
    error instanceof Error ? `${error.name} ${error.message} ${String((error as { cause?: unknown }).cause ?? '')}` : String(error);
  return /timed? ?out|deadline/i.test(text) ? 'timeout' : 'unavailable';
}

export function createResilientEngine(options: ResilientEngineOptions): ResilientEngine {
  let { config, inner } = options;
  const { logger } = options;
  const now = options.now ?? Date.now;
  const deadlineMs = options.decisionDeadlineMs ?? 2 * config.redis.commandTimeoutMs + 25;
  const log = logger.child({ module: 'resilient-engine' });
  const topology = topologyOf(config);
  const federated = topology.regions.length > 1;
  const local: LocalFallback = createLocalFallback({
    instancesPerRegion: config.breaker.instancesPerRegion,
    capacity: options.localCapacity,
    // The region's demarcation share of limit + budget (protocol.ts portion); never another region's part.
    federation: federated
      ? {
          units: topology.units[topology.selfIndex] ?? 0,
          budget: (rule) => scriptBudget(rule, config.federation.leakageBudget, topology.regions.length),
          federated: (rule) => FEDERATED_ALGORITHMS.has(rule.algorithm),
        }
      : undefined,
  });

  /**
   * Writes what the local fallback admitted into Redis, against the windows it was admitted in (so this region's
   * later decisions and, through gossip, the peers count it). Runs when the breaker closes; what fails stays
   * unsettled for the next close.
   */
  let settling: Promise<void> | undefined;
  /** A settlement failed: retried after the next successful Redis decision (or the next close). */
  let settleAgain = false;
  const settleFallback = () => {
    settleAgain = false;
    if (settling) return settling;
    const items = local.unsettled(now());
    const decider = settler(inner);
    if (items.length === 0 || !decider) {
      local.prune(now());
      return Promise.resolve();
    }
    settling = withDeadline(decider.settle(items), deadlineMs)
      .then(() => {
        local.settled(items);
        fallbackSettledTotal.inc(items.reduce((sum, item) => sum + item.count, 0));
        log.info(
          { event: 'fallback.settled', keys: items.length, admissions: items.reduce((sum, item) => sum + item.count, 0) },
          'local fallback admissions written to Redis',
        );
      })
      .catch((error: unknown) => {
        settleAgain = true;
        log.warn(
          { event: 'fallback.settle_failed', keys: items.length, error: errorMessage(error) },
          'could not write local fallback admissions to Redis; retried after the next successful decision',
        );
      })
      .finally(() => {
        settling = undefined;
        local.prune(now());
      });
    return settling;
  };

  const timedProbe = async () => {
    const started = performance.now();
    try {
      return await withDeadline(options.probe(), deadlineMs);
    } catch (error) {
      redisErrorsTotal.inc({ command: 'ping', kind: errorKind(error) });
      throw error;
    } finally {
      redisCommandSeconds.observe({ command: 'ping' }, (performance.now() - started) / 1000);
    }
  };

  const breaker = createBreaker({
    settings: config.breaker,
    probe: timedProbe,
    logger: log,
    region: config.region,
    // Local counts are per window and survive the close (a flapping breaker must not hand out a fresh share per
    // trip); what they admitted is written to Redis now that it answers again.
    onTransition: (state) => {
      if (state === 'closed') void settleFallback();
    },
  });

  /** A `failMode: open` rule decided by the local fallback while the breaker is open (never a closed rule). */
  const usesFallback = (rule: Rule) => rule.failMode === 'open' && (rule.localFallback ?? config.breaker.localFallback);

  /**
   * Redis did not decide. A `failMode: closed` rule is rejected, always: only Redis can prove a request is within
   * quota. A `failMode: open` rule is admitted, or, while the breaker is open and the rule uses the local
   * fallback, decided in memory against this instance's share.
   */
  const degraded = (matched: readonly MatchedRule[], request: RequestContext): Decision => {
    const cost = request.cost ?? 1;
    const at = now();
    const waitMs = Math.max(1_000, config.breaker.probeIntervalMs * config.breaker.successThreshold);
    const fallbackInputs = breaker.state === 'open' ? matched.filter((entry) => usesFallback(entry.rule)) : [];
    const fixed: (RuleOutcome | undefined)[] = matched.map(({ rule }) => {
      if (fallbackInputs.length > 0 && usesFallback(rule)) return undefined;
      const base = outcomeBase(rule);
      return rule.failMode === 'open'
        ? { ...base, allowed: true, remaining: base.limit, resetAtMs: at + rule.period, retryAfterMs: 0, source: 'fail-open' as const }
        : { ...base, allowed: false, remaining: 0, resetAtMs: at + waitMs, retryAfterMs: waitMs, source: 'fail-closed' as const };
    });
    let leases: Lease[] = [];
    let outcomes: RuleOutcome[];
    if (fallbackInputs.length === 0) {
      outcomes = fixed as RuleOutcome[];
    } else {
      // A request a closed rule rejects anyway consumes nothing locally.
      const rejected = fixed.some((o) => o !== undefined && !o.allowed && !o.shadow);
      const result = local.decide(fallbackInputs, cost, at, !rejected);
      leases = rejected ? [] : result.leases;
      let next = 0;
      outcomes = fixed.map((o) => o ?? result.outcomes[next++]!);
    }
    const allowed = outcomes.every((o) => o.allowed || o.shadow);
    return { allowed, outcomes, binding: bindingOutcome(outcomes), leases: allowed ? leases : [] };
  };

  /** One decision by Redis under the deadline; a store failure is decided by the fail modes and counted. */
  const decideByRedis = async (matched: readonly MatchedRule[], request: RequestContext): Promise<Decision> => {
    const callStarted = performance.now();
    try {
      // The rules matched above are the inner engine's own when it was built from this config.
      const decider = matchedDecider(inner);
      const own = decider !== undefined && decider.rules === config.rules ? decider : undefined;
      // An answer from the over-limit cache needs no deadline (no timer per denied request).
      const hit = own?.cached?.(matched, request);
      const decision =
        hit ?? (await withDeadline(own ? own.decideMatched(matched, request) : inner.decide(request), deadlineMs, 'decision'));
      breaker.recordSuccess();
      if (settleAgain) void settleFallback();
      return decision;
    } catch (error) {
      if (!isStoreFailure(error)) throw error;
      redisErrorsTotal.inc({ command: 'decide', kind: errorKind(error) });
      log.debug({ event: 'decide.failed', error: (error as Error).message }, 'Redis decision failed; fail mode decides');
      // Decided under the state the request met (closed: fail modes), then counted toward opening.
      const decision = degraded(matched, request);
      breaker.recordFailure(error);
      return decision;
    } finally {
      redisCommandSeconds.observe({ command: 'decide' }, (performance.now() - callStarted) / 1000);
    }
  };

  let rulesByName = new Map(config.rules.map((rule) => [rule.name, rule]));
  /**
   * maxWaitMs (park.ts): a false denial is decided again, a little later each time (one request at a time per
   * caller and rules), until admitted, denied for good (a true denial, a Redis failure, the breaker opens) or the
   * rule's wait is over; then it is answered.
   */
  const parking = createParkingLot({ stop: () => breaker.state === 'open' });
  const park = async (first: Decision, budgetMs: number, matched: readonly MatchedRule[], request: RequestContext) => {
    const decision = await parking.park(
      parkSignature(first, request),
      first,
      budgetMs,
      () => decideByRedis(matched, request),
      (next) => parkBudgetMs(next, rulesByName) > 0,
    );
    parkedTotal.inc({ outcome: decision.allowed ? 'admitted' : 'denied' });
    return decision;
  };

  const record = (decision: Decision, endpoint: string) => {
    for (const outcome of decision.outcomes) {
      const verdict = outcome.allowed ? 'allowed' : outcome.shadow ? 'shadow_limited' : 'limited';
      decisionsTotal.inc({ rule: outcome.rule, endpoint, outcome: verdict, source: outcome.source });
      if (outcome.allowed && outcome.limit > 0 && outcome.limit - outcome.remaining >= 0.8 * outcome.limit)
        nearLimitTotal.inc({ rule: outcome.rule });
    }
    if (decision.allowed) {
      const degradedSource = decision.outcomes.find((o) => o.source === 'fail-open' || o.source === 'local-fallback')?.source;
      if (degradedSource) degradedAdmissionsTotal.inc({ mode: degradedSource });
    }
  };

  return {
    breaker,
    get config() {
      return config;
    },
    async swap(next) {
      const previous = inner;
      config = next.config;
      rulesByName = new Map(config.rules.map((rule) => [rule.name, rule]));
      inner = next.inner;
      await previous.close();
    },
    async decide(request) {
      const started = performance.now();
      const matched = matchRules(config, request);
      const endpoint = endpointOf(matched);
      let decision: Decision;
      if (matched.length === 0) {
        decision = { allowed: true, outcomes: [], binding: undefined, leases: [] };
      } else if (breaker.state === 'open') {
        decision = degraded(matched, request);
      } else {
        decision = await decideByRedis(matched, request);
        const budget = parkBudgetMs(decision, rulesByName);
        if (budget > 0) decision = await park(decision, budget, matched, request);
      }
      record(decision, endpoint);
      limiterOverheadSeconds.observe((performance.now() - started) / 1000);
      return { ...decision, endpoint };
    },
    async release(leases: readonly Lease[]) {
      const remote = local.release(leases);
      // An open breaker means no Redis calls; an unreleased lease expires after the rule's leaseTtl.
      if (remote.length === 0 || breaker.state === 'open') return;
      const started = performance.now();
      try {
        await withDeadline(inner.release(remote), deadlineMs, 'lease release');
      } catch (error) {
        redisErrorsTotal.inc({ command: 'release', kind: errorKind(error) });
        log.debug(
          { event: 'release.failed', leases: remote.length, error: (error as Error).message },
          'lease release failed; leases expire by TTL',
        );
      } finally {
        redisCommandSeconds.observe({ command: 'release' }, (performance.now() - started) / 1000);
      }
    },
    async close() {
      breaker.stop();
      await inner.close();
    },
  };
}

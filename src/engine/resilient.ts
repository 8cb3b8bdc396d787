// Wraps the Redis decision engine with the outage policy and composes its parts: a bounded wait per decision
// (redis-decision.ts), a circuit breaker (store-breaker.ts), each rule's fail mode or the in-memory local
// fallback instead of Redis (fail-modes.ts, region-fallback.ts, fallback-settlement.ts), the opt-in wait of a
// false denial (wait-for-grant.ts), the decision metrics (decision-metrics.ts), the sketches of the limited keys
// (top-keys.ts) and, when a tracer is given, a span per decision (decision-tracer.ts), so every front end (gateway,
// /v1/check, the embedded middleware) decides and is observed the same way.
import { performance } from 'node:perf_hooks';
import { isDeepStrictEqual } from 'node:util';
import { withDeadline } from '../deadline.ts';
import type { Config } from '../config/schema.ts';
import type { Logger } from '../log.ts';
import { limiterOverheadSeconds, listMatchesTotal, OTHER_ENDPOINT, unlimitedDecisionsTotal } from '../metrics.ts';
import { combinedVerdict, compileLists, NO_LISTS } from './access-lists.ts';
import type { ReportedCost } from './cost-from-response.ts';
import type { AdminLists } from './admin-lists.ts';
import type { AdminPlans } from './admin-plans.ts';
import type { Breaker } from './breaker.ts';
import { recordDecision } from './decision-metrics.ts';
import type { DecisionTracer } from './decision-tracer.ts';
import { endpointOf } from './endpoint.ts';
import { degradedDecision } from './fail-modes.ts';
import { createFallbackSettlement } from './fallback-settlement.ts';
import { asForgetter, type EngineInUse } from './inner-engine.ts';
import { releaseLeases, type LeaseReleaseContext } from './lease-release.ts';
import { decideByRedis, defaultDecisionDeadlineMs, type RedisDecisionContext } from './redis-decision.ts';
import { createRegionFallback } from './region-fallback.ts';
import { choosePlan, hasPlanRules, type ReloadedPlans } from './plans.ts';
import { matchRules } from './rules.ts';
import { createStoreBreaker } from './store-breaker.ts';
import { createTopKeys, type TopKeys } from './top-keys.ts';
import { exposeTopKeys } from './top-keys-metrics.ts';
import type { Decision, DecisionEngine, Lease, MatchedRule, ObservedDecision, RequestContext } from './types.ts';
import type { Rule } from '../config/schema.ts';
import { createGrantWaits, waitBudgetMs, waitForGrant } from './wait-for-grant.ts';

/**
 * A decision engine that always answers: a deadline on each decision, a circuit breaker on the store, the rule's
 * fail mode (or the local fallback) while Redis cannot decide, and policy reloads (`swap`).
 *
 * @example
 * ```ts
 * const { engine } = await createRegionEngine(config); // a ResilientEngine
 * console.log(engine.breaker.state);
 * await engine.swap({ config: next, inner: createRedisEngine({ config: next, redis }) });
 * ```
 */
export interface ResilientEngine extends DecisionEngine {
  decide(request: RequestContext): Promise<ObservedDecision>;
  readonly breaker: Breaker;
  /** The rules in force (they change on a policy reload). */
  readonly config: Config;
  /** The sketches of the keys denied and admitted most per rule (undefined with `topKeys.enabled: false`). */
  readonly topKeys: TopKeys | undefined;
  /**
   * Policy reload: decide with new rules and a new inner engine from the next request on. The breaker and the
   * local fallback stay (an outage in progress stays an outage); in-flight decisions finish on the old engine.
   */
  swap(next: { config: Config; inner: DecisionEngine }): Promise<void>;
  /** The request with the caller's plan filled in (docs/plans.md), as a decision sees it; unchanged without plans. */
  withPlan(request: RequestContext): RequestContext;
  /** Forget what this process remembers of these state keys (the over-limit cache): an operator reset them. */
  forget(keys: readonly string[]): void;
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
  /**
   * The entries added through the admin API (createAdminLists), matched with the config's `lists` before any rule.
   * Without it only the config's lists apply.
   */
  adminLists?: Pick<AdminLists, 'compiled'>;
  /**
   * The plan assignments of the admin API (createAdminPlans), which win over the config's `plans.keys`. Without it
   * only the config's plans apply.
   */
  adminPlans?: Pick<AdminPlans, 'assignment'>;
  /** A span per decision (startTracing; its creator shuts it down); without it tracing costs nothing. */
  tracer?: DecisionTracer | undefined;
}

/** What a traced decision collects on its way. */
interface DecisionTiming {
  redisMs: number;
  rules: string[];
}

/**
 * The decision with the endpoint it was counted under, in one object shape whatever the decision's: a spread
 * (`{ ...decision, endpoint }`) of decisions of several shapes took V8's slow path for every request (perf:
 * Runtime_DefineNamedOwnIC_Slow, about 0.7 µs a /v1/check request; docs/performance.md, hot path, twenty-first pass).
 * It copies every field of a Decision: a field added there is added here too.
 */
function observed(decision: Decision, endpoint: string): ObservedDecision {
  const out: ObservedDecision = {
    allowed: decision.allowed,
    outcomes: decision.outcomes,
    binding: decision.binding,
    leases: decision.leases,
    endpoint,
  };
  if (decision.list !== undefined) out.list = decision.list;
  if (decision.refund !== undefined) out.refund = decision.refund;
  return out;
}

/**
 * Wraps an inner engine (the Redis engine) so every request gets an answer: the deadline, the breaker probed with
 * `probe`, fail open / fail closed per rule and the in-memory local fallback while the breaker is open.
 *
 * @example
 * ```ts
 * import { pino } from 'pino';
 * import { createRedisEngine, createRegionRedis, createResilientEngine, loadConfigFile } from 'quotafed/engine';
 *
 * const config = loadConfigFile('regions/us-east.yaml');
 * const redis = createRegionRedis(config);
 * const engine = createResilientEngine({
 *   config,
 *   inner: createRedisEngine({ config, redis }),
 *   probe: () => redis.ping(),
 *   logger: pino(),
 * });
 * ```
 */
export function createResilientEngine(options: ResilientEngineOptions): ResilientEngine {
  const current: EngineInUse = { config: options.config, inner: options.inner };
  const now = options.now ?? Date.now;
  const deadlineMs = options.decisionDeadlineMs ?? defaultDecisionDeadlineMs(current.config);
  const log = options.logger.child({ module: 'resilient-engine' });
  const local = createRegionFallback(current.config, options.localCapacity, now());
  const settlement = createFallbackSettlement({ local, current, deadlineMs, now, log });
  const breaker = createStoreBreaker({
    settings: current.config.breaker,
    region: current.config.region,
    probe: options.probe,
    deadlineMs,
    logger: log,
    // Local counts are per window and survive the close (a flapping breaker must not hand out a fresh share per
    // trip); what they admitted is written to Redis now that it answers again.
    onClosed: () => void settlement.settle(),
  });

  const degraded = (matched: readonly MatchedRule[], request: RequestContext): Decision => {
    const decision = degradedDecision({
      matched,
      cost: request.cost ?? 1,
      at: now(),
      settings: current.config.breaker,
      local,
      peek: request.peek,
    });
    // Admitted locally while the breaker is still closed: written to Redis after its next answer (an open breaker
    // settles when it closes).
    if (
      breaker.state === 'closed' &&
      request.peek !== true &&
      decision.outcomes.some((outcome) => outcome.source === 'local-fallback' && outcome.allowed)
    ) {
      settlement.markPending();
    }
    return decision;
  };
  const redis: RedisDecisionContext = { current, deadlineMs, breaker, settlement, log, degraded };
  const releasing: LeaseReleaseContext = { local, current, breaker, deadlineMs, log };

  let rulesByName = new Map(current.config.rules.map((rule) => [rule.name, rule]));
  // The lists come before every rule, in every way in: an allowed caller costs no Redis call, a denied one none either.
  let configLists = compileLists(current.config.lists);
  const adminLists = options.adminLists;
  const adminPlans = options.adminPlans;
  /** The plans before the last reload that changed them: a key whose configured plan changed is in transition. */
  let reloadedPlans: ReloadedPlans | undefined;
  let plansActive = hasPlanRules(current.config);
  /** The caller's plan, when some rule takes one (docs/plans.md). */
  const planned = (request: RequestContext): RequestContext => {
    if (!plansActive || request.apiKey === undefined || request.plan !== undefined) return request;
    const plan = choosePlan(current.config, adminPlans?.assignment(request.apiKey), request.apiKey, now(), reloadedPlans);
    return { ...request, plan };
  };
  const countUnlimited = (rule: Rule, endpoint: string | undefined) =>
    unlimitedDecisionsTotal.inc({ rule: rule.name, endpoint: endpoint ?? OTHER_ENDPOINT });
  /**
   * maxWaitMs (wait-for-grant.ts): a false denial is decided again, a little later each time (one request at a
   * time per caller and rules), until admitted, denied for good (a true denial, a Redis failure, the breaker
   * opens) or the rule's wait is over; then it is answered.
   */
  const grantWaits = createGrantWaits({ stop: () => breaker.state === 'open' });
  const topKeys = current.config.topKeys.enabled ? createTopKeys(current.config.topKeys) : undefined;
  const unexpose = topKeys ? exposeTopKeys({ topKeys, rules: () => current.config.rules }) : undefined;

  /** One decision; `timing` (a traced decision only) collects the rules matched and the time spent on Redis. */
  const decideOnce = async (asked: RequestContext, timing?: DecisionTiming): Promise<ObservedDecision> => {
    const started = performance.now();
    const request = planned(asked);
    const list = combinedVerdict(configLists, adminLists?.compiled() ?? NO_LISTS, request);
    if (list !== undefined) {
      listMatchesTotal.inc({ list: list.list, kind: list.kind });
      limiterOverheadSeconds.observe((performance.now() - started) / 1000);
      return { allowed: list.list === 'allow', outcomes: [], binding: undefined, leases: [], list, endpoint: endpointOf([]) };
    }
    const matched = matchRules(current.config, request, request.peek === true ? undefined : countUnlimited);
    const endpoint = endpointOf(matched);
    if (timing !== undefined) timing.rules = matched.map((entry) => entry.rule.name);
    let decision: Decision;
    if (matched.length === 0) {
      decision = { allowed: true, outcomes: [], binding: undefined, leases: [] };
    } else if (breaker.state === 'open') {
      decision = degraded(matched, request);
    } else {
      decision = await decideByRedis(redis, matched, request, timing);
      // A peek never waits for a grant: it answers what the decision is now. Neither does a descriptor under
      // Envoy's limit override: its key names no configured rule, so no peer grants it (src/engine/descriptors.ts).
      const budget = request.peek === true || request.descriptor?.limit ? 0 : waitBudgetMs(decision, rulesByName);
      if (budget > 0) {
        decision = await waitForGrant(
          grantWaits,
          decision,
          budget,
          request,
          () => decideByRedis(redis, matched, request, timing),
          () => rulesByName,
        );
      }
    }
    recordDecision(decision, endpoint, request.peek === true);
    // A peek spends nothing: it is not consumption, nor a denial of anything.
    if (request.peek !== true) topKeys?.record(matched, decision, request, now());
    limiterOverheadSeconds.observe((performance.now() - started) / 1000);
    return observed(decision, endpoint);
  };

  const tracer = options.tracer;
  const region = current.config.region;
  /** decideOnce and its span (the engine's decide only when a tracer is given). */
  const decideTraced = async (request: RequestContext): Promise<ObservedDecision> => {
    const startMs = performance.timeOrigin + performance.now();
    const timing: DecisionTiming = { redisMs: 0, rules: [] };
    const decision = await decideOnce(request, timing);
    tracer?.decided({
      startMs,
      endMs: performance.timeOrigin + performance.now(),
      region,
      rules: timing.rules,
      deniedRules: decision.outcomes.filter((outcome) => !outcome.allowed).map((outcome) => outcome.rule),
      outcome: decision.allowed ? 'allowed' : 'denied',
      binding: decision.binding?.rule,
      source: decision.binding?.source ?? 'none',
      redisMs: timing.redisMs,
      endpoint: decision.endpoint,
      cost: request.cost ?? 1,
    });
    return decision;
  };

  return {
    breaker,
    topKeys,
    get config() {
      return current.config;
    },
    async swap(next) {
      const previous = current.inner;
      if (!isDeepStrictEqual(current.config.plans, next.config.plans)) reloadedPlans = { plans: current.config.plans, at: now() };
      plansActive = hasPlanRules(next.config);
      current.config = next.config;
      rulesByName = new Map(current.config.rules.map((rule) => [rule.name, rule]));
      configLists = compileLists(current.config.lists);
      current.inner = next.inner;
      topKeys?.retain(current.config.rules);
      await previous.close();
    },
    withPlan: planned,
    // Chosen once: without a tracer a decision does not even look for one.
    decide: tracer === undefined ? (request) => decideOnce(request) : decideTraced,
    forget(keys) {
      asForgetter(current.inner)?.forget(keys);
    },
    async settleResponse(decision, status, reported) {
      if (decision.refund === undefined || current.inner.settleResponse === undefined) return 0;
      // An answer that reports more than a costFromResponse rule reserved: charged the reserve (counted by the engine).
      const logged: ReportedCost | undefined =
        reported &&
        ((rule) => {
          const actual = reported(rule);
          const reserve = rule.costFromResponse?.reserve;
          if (actual !== undefined && reserve !== undefined && actual > reserve)
            log.debug(
              { event: 'cost.overrun', rule: rule.name, actual, reserve },
              'the answer reported more than the rule reserved; charged the reserve',
            );
          return actual;
        });
      try {
        return await withDeadline(current.inner.settleResponse(decision, status, logged), deadlineMs, 'response refund');
      } catch (error) {
        // The admission stays counted: the safe side of the limit.
        log.warn({ event: 'refund.failed', error: (error as Error).message }, 'could not refund an admission its rule does not count');
        return 0;
      }
    },
    release: (leases: readonly Lease[]) => releaseLeases(releasing, leases),
    async close() {
      breaker.stop();
      unexpose?.();
      await current.inner.close();
    },
  };
}

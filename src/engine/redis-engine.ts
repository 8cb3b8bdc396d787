// The decision engine against the region's Redis: one atomic decide.lua call per identity (cluster slot),
// a refund when a request spans identities and one of them denies, and a local over-limit cache that
// answers callers known to be exhausted without a Redis hop.
import { randomUUID } from 'node:crypto';
import { FEDERATED_ALGORITHMS, type Config, type Rule } from '../config/schema.ts';
import { topologyOf, type Topology } from '../protocol/index.ts';
import { KEY_SHARDS, layoutOf } from '../keys.ts';
import { StoreUnavailableError, errorMessage } from './errors.ts';
import type { Unsettled } from './local-fallback.ts';
import { createOverLimitCache, type OverLimitCache } from './over-limit-cache.ts';
import { createLocalLeases, type LeaseAsks, type LeaseReturn } from './local-leases.ts';
import type { RegionRedis } from '../store/client.ts';
import { advertisedLimit, matchRules } from './rules.ts';
import { falseDenialsTotal, localLeaseUnitsTotal, responseCostsTotal, responseCostOverrunTotal, responseRefundsTotal } from '../metrics.ts';
import { chargedCost, ruleSettlement, settlesAfterAnswer, type ReportedCost } from './cost-from-response.ts';
import { createTimeToGrant } from './time-to-grant.ts';
import { Cluster } from 'ioredis';
import { createDecideBatcher } from './decide-batcher.ts';
import type { RedisEngineTuning } from './redis-engine-tuning.ts';
import { withScripts, type ScriptedRedis } from '../store/commands.ts';
import { decideCaller } from '../store/decide-caller.ts';
import { decideCall, decideRuleArgs, decideShardKeys, parseDecideReply, type DecideReply } from '../store/decide-calls.ts';
import {
  refundCall,
  refundRuleOf,
  type RefundRule,
  releaseLeasesCall,
  runRefund,
  runReleaseLeases,
  runSettleFallback,
  settleFallbackCall,
} from '../store/settle-calls.ts';
import {
  quotaRemainingOf,
  type Decision,
  type DecisionEngine,
  type Lease,
  type MatchedRule,
  type RequestContext,
  type RuleOutcome,
} from './types.ts';

export interface RedisEngineOptions {
  config: Config;
  redis: RegionRedis;
  /** Answer exhausted callers from memory until their retry time (default on; bounded). */
  overLimitCache?: boolean | { maxEntries: number };
  /** Pin the clock (tests only); Redis TIME otherwise. */
  nowMs?: () => number;
}

interface ShardGroup {
  shard: number;
  rules: MatchedRule[];
}

/** The Redis engine also decides rules matched by its caller, so a wrapper that matched already need not again. */
export interface RedisDecisionEngine extends DecisionEngine {
  readonly topology: Topology;
  /** The rules `decideMatched` expects its matches to come from (the engine's config). */
  readonly rules: readonly Rule[];
  /** Decide rules already matched against `request` with `matchRules(config, request)` of this engine's config. */
  decideMatched(matched: readonly MatchedRule[], request: RequestContext): Promise<Decision>;
  /**
   * The over-limit cache's denial or a local lease's admission (which it charges) for rules matched as for
   * decideMatched, or undefined when Redis must decide. Synchronous: what decideMatched would answer without a
   * Redis call.
   */
  cached(matched: readonly MatchedRule[], request: RequestContext): Decision | undefined;
  /** Write local-fallback admissions into their windows (settle_fallback.lua, one call per shard). */
  settle(items: readonly Unsettled[]): Promise<void>;
  /** Forget the over-limit cache's denials of these state keys (an operator reset them). */
  forget(keys: readonly string[]): void;
  /**
   * Refund what rules with `countResponses` do not count for the answer's status, and what costFromResponse rules
   * reserved beyond the cost the answer reports (refund.lua).
   */
  settleResponse(decision: Decision, status: number, reported?: ReportedCost): Promise<number>;
}

function groupByShard(matched: readonly MatchedRule[]): ShardGroup[] {
  // Nearly every request has one principal: one group, no map.
  const firstShard = matched[0]!.shard;
  if (matched.every((entry) => entry.shard === firstShard)) return [{ shard: firstShard, rules: matched as MatchedRule[] }];
  const groups = new Map<number, ShardGroup>();
  for (const entry of matched) {
    let group = groups.get(entry.shard);
    if (!group) {
      group = { shard: entry.shard, rules: [] };
      groups.set(entry.shard, group);
    }
    group.rules.push(entry);
  }
  return [...groups.values()];
}

/**
 * The binding outcome: a denying enforcing rule (longest wait first), else the one with the least quota
 * remaining (quotaRemainingOf: the count the headers report).
 */
export function bindingOutcome(outcomes: readonly RuleOutcome[]): RuleOutcome | undefined {
  let binding: RuleOutcome | undefined;
  for (const outcome of outcomes) {
    if (outcome.shadow) continue;
    if (binding === undefined) {
      binding = outcome;
      continue;
    }
    if (outcome.allowed !== binding.allowed) {
      if (!outcome.allowed) binding = outcome;
      continue;
    }
    if (!outcome.allowed ? outcome.retryAfterMs > binding.retryAfterMs : quotaRemainingOf(outcome) < quotaRemainingOf(binding))
      binding = outcome;
  }
  return binding ?? outcomes[0];
}

function storeError(error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  return new StoreUnavailableError(`Redis could not decide: ${errorMessage(error)}`, { cause: error });
}

/**
 * The decision engine on the region's Redis: matches a request to the config's rules and decides all of them in
 * one atomic script call (decisions that arrive together share a call). Throws StoreUnavailableError when Redis
 * cannot decide; wrap it in createResilientEngine for the breaker, the fail modes and the local fallback.
 *
 * @example
 * ```ts
 * import { createRedisEngine, createRegionRedis, loadConfigFile } from 'quotafed/engine';
 *
 * const config = loadConfigFile('regions/us-east.yaml');
 * const engine = createRedisEngine({ config, redis: createRegionRedis(config) });
 * const decision = await engine.decide({ apiKey: 'api-key-42', ip: '203.0.113.9', method: 'GET', path: '/search' });
 * ```
 */
export function createRedisEngine(options: RedisEngineOptions): RedisDecisionEngine {
  return createTunedRedisEngine(options);
}

/** createRedisEngine with the comparison knobs of redis-engine-tuning.ts (benchmarks and tests only). */
export function createTunedRedisEngine(options: RedisEngineOptions & RedisEngineTuning): RedisDecisionEngine {
  const { config } = options;
  const redis: ScriptedRedis = withScripts(options.redis);
  const topology = topologyOf(config);
  const keys = layoutOf(config);
  const federated = topology.regions.length > 1;
  const caller = decideCaller(redis, {
    functions: options.redisFunctions,
    script: federated || options.singleRegionScript === false ? 'decide' : 'decideSingleRegion',
  });
  const batchOption = options.batch ?? true;
  const batcher = batchOption === false ? undefined : createDecideBatcher(caller, batchOption === true ? {} : batchOption);
  // On a cluster the keys of one call must share a slot: one queue per shard. One queue otherwise.
  const laneOf = redis instanceof Cluster ? (shard: number) => shard : () => 0;
  const callDecide = (call: (string | number)[], shard: number) => (batcher ? batcher.submit(call, laneOf(shard)) : caller(call));
  const cacheOption = options.overLimitCache ?? true;
  const cache: OverLimitCache | undefined =
    cacheOption === false ? undefined : createOverLimitCache(cacheOption === true ? 100_000 : cacheOption.maxEntries);
  const regions = federated ? topology.regions.length : 1;
  const timeToGrant = federated ? createTimeToGrant() : undefined;
  // Everything of a decide call that does not change per request, built once: the shard's fixed keys and
  // each rule's script arguments (cost and lease id are filled in per call).
  const fixedKeysOf: string[][] = [];
  for (let shard = 0; shard < KEY_SHARDS; shard++)
    fixedKeysOf.push(decideShardKeys(keys, shard, federated ? topology.peerIndexes : undefined));
  const scriptArgs = (rule: Rule) => decideRuleArgs(rule, config.federation.leakageBudget, regions);
  const ruleArgs = new Map(config.rules.map((rule) => [rule, scriptArgs(rule)]));
  // A rule object of another config (a caller's own matchRules) is built per call, as before.
  const argsOf = (rule: Rule) => ruleArgs.get(rule) ?? scriptArgs(rule);

  const decideGroup = async (
    group: ShardGroup,
    cost: number,
    leaseId: string,
    peek: boolean,
    asks?: LeaseAsks,
  ): Promise<{ group: ShardGroup; reply: DecideReply }> => {
    const call = decideCall({
      fixedKeys: fixedKeysOf[group.shard] ?? [keys.shardMarkerKey(group.shard)],
      ruleKeys: group.rules.map((entry) => entry.key),
      rules: group.rules.map((entry) => argsOf(entry.rule)),
      topology,
      regions,
      cost,
      leaseId,
      leaseAsks: asks && group.rules.map((entry) => asks.get(entry.key) ?? 0),
      now: options.nowMs ? options.nowMs() : '',
      peek,
    });
    return { group, reply: parseDecideReply(await callDecide(call, group.shard), group.rules.length) };
  };

  // Gives `cost` units back to each rule of one shard's admission: one refund.lua call per distinct cost (a
  // costFromResponse rule charged its reserve, the others the request's cost). Resolves with the keys refunded.
  const refundShard = async (shard: number, now: number, items: readonly { rule: Rule; key: string; cost: number }[], leaseId: string) => {
    const byCost = new Map<number, RefundRule[]>();
    for (const { rule, key, cost } of items) {
      if (cost <= 0) continue;
      const list = byCost.get(cost) ?? [];
      list.push(refundRuleOf(key, rule));
      byCost.set(cost, list);
    }
    let refunded = 0;
    for (const [cost, rules] of byCost) {
      const marker = keys.refundMarkerKey(shard, randomUUID());
      refunded += await runRefund(redis, refundCall(topology.selfIndex, now, rules, cost, leaseId, marker));
    }
    return refunded;
  };

  const refund = async (result: Awaited<ReturnType<typeof decideGroup>>, cost: number, leaseId: string) => {
    const items = result.group.rules.map(({ key, rule }) => ({ key, rule, cost: chargedCost(rule, cost) }));
    await refundShard(result.group.shard, result.reply.now, items, leaseId);
  };

  // Local leases (rules[].lease), when a rule takes them: ended leases give their unspent units back (refund.lua,
  // at the take's clock so a window's units go back to the window they were counted in). A return that fails
  // leaves them spent: the safe side of the limit.
  const localLeases = config.rules.some((rule) => rule.lease !== undefined) ? createLocalLeases() : undefined;
  const giveBack = async (returns: readonly LeaseReturn[]): Promise<void> => {
    await Promise.all(
      returns.map(async ({ rule, key, shard, takenAtMs, units }) => {
        const marker = keys.refundMarkerKey(shard, randomUUID());
        const call = refundCall(topology.selfIndex, takenAtMs, [refundRuleOf(key, rule)], units, '', marker);
        try {
          await runRefund(redis, call);
          localLeaseUnitsTotal.inc({ rule: rule.name, event: 'returned' }, units);
        } catch {
          localLeaseUnitsTotal.inc({ rule: rule.name, event: 'return_failed' }, units);
        }
      }),
    );
  };
  const shortestLeaseMs = Math.min(...config.rules.map((rule) => rule.lease?.ttlMs ?? Infinity));
  const leaseSweep =
    localLeases && setInterval(() => void giveBack(localLeases.expired()), Math.min(1_000, Math.max(10, shortestLeaseMs / 2)));
  leaseSweep?.unref();

  // Rules settled once the answer is known (countResponses, costFromResponse): their admissions carry a refund
  // ticket (none otherwise: no cost per request).
  const settlesSome = config.rules.some(settlesAfterAnswer);

  const cached = (matched: readonly MatchedRule[], request: RequestContext): Decision | undefined => {
    if (matched.length === 0) return undefined;
    const outcome = cache?.lookup(matched, request.cost ?? 1, chargedCost);
    if (outcome) return { allowed: false, outcomes: [outcome], binding: outcome, leases: [] };
    // A peek spends nothing.
    const leased = request.peek === true ? undefined : localLeases?.spend(matched, request.cost ?? 1);
    return leased && { allowed: true, outcomes: leased, binding: bindingOutcome(leased), leases: [] };
  };

  const decideMatched = async (matched: readonly MatchedRule[], request: RequestContext): Promise<Decision> => {
    const cost = request.cost ?? 1;
    if (matched.length === 0) return { allowed: true, outcomes: [], binding: undefined, leases: [] };

    const hit = cached(matched, request);
    if (hit) return hit;
    // A lease take on its way for this key: wait for it and spend from it rather than ask Redis alongside it.
    const taking = request.peek === true ? undefined : localLeases?.pending(matched);
    if (taking) {
      await taking;
      const spent = cached(matched, request);
      if (spent) return spent;
    }

    // A peek writes nothing: no lease to take, nothing to refund.
    const peek = request.peek === true;
    const needsLease = !peek && matched.some((entry) => entry.rule.algorithm === 'concurrency' || entry.rule.algorithm === 'slidingLog');
    const leaseId = needsLease ? randomUUID() : '';
    const asks = peek ? undefined : localLeases?.asks(matched);
    const sentAtMs = asks ? localLeases!.now() : 0;
    let results: Awaited<ReturnType<typeof decideGroup>>[];
    try {
      const groups = groupByShard(matched);
      results =
        groups.length === 1
          ? [await decideGroup(groups[0]!, cost, leaseId, peek, asks)]
          : await Promise.all(groups.map((group) => decideGroup(group, cost, leaseId, peek, asks)));
    } catch (error) {
      throw storeError(error);
    } finally {
      if (asks) localLeases!.settled(asks);
    }
    if (asks) {
      for (const result of results) {
        if (!result.reply.allAllowed) continue;
        result.reply.rules.forEach((answer, index) => {
          if (answer.leased > 0) localLeaseUnitsTotal.inc({ rule: result.group.rules[index]!.rule.name, event: 'taken' }, answer.leased);
        });
        const replaced = localLeases!.took(result.group.rules, result.reply, sentAtMs);
        if (replaced.length > 0) void giveBack(replaced);
      }
    }
    const allowed = results.every((result) => result.reply.allAllowed);
    if (!allowed && results.length > 1 && !peek) {
      try {
        await Promise.all(results.filter((result) => result.reply.allAllowed).map((result) => refund(result, cost, leaseId)));
      } catch (error) {
        throw storeError(error);
      }
    }

    const outcomes: RuleOutcome[] = [];
    const leases: Lease[] = [];
    for (const result of results) {
      result.group.rules.forEach(({ rule, key }, index) => {
        const { allowed: ruleAllowed, remaining, quotaRemaining, resetAtMs, retryAfterMs, falseDenial } = result.reply.rules[index]!;
        const outcome: RuleOutcome = {
          rule: rule.name,
          algorithm: rule.algorithm,
          allowed: ruleAllowed,
          limit: advertisedLimit(rule),
          remaining,
          quotaRemaining,
          resetAtMs,
          retryAfterMs,
          periodMs: rule.period,
          shadow: rule.shadow,
          failMode: rule.failMode,
          source: 'redis',
        };
        if (falseDenial) {
          outcome.falseDenial = true;
          if (!peek) falseDenialsTotal.inc({ rule: rule.name });
        }
        outcomes.push(outcome);
        if (timeToGrant && !peek && FEDERATED_ALGORITHMS.has(rule.algorithm) && !rule.shadow)
          timeToGrant.decided(rule.name, key, rule.period, result.reply.now, allowed && ruleAllowed, falseDenial);
        if (allowed && outcome.allowed && !peek && rule.algorithm === 'concurrency') leases.push({ key, id: leaseId, slots: cost });
        // A false denial is not cached: the federation has room, and a grant may come within a round trip. Nor a
        // denial of a rule settled after the answer (countResponses, costFromResponse): its refunds free room at
        // any time, and a cached denial would hold until the retry time regardless.
        if (!outcome.allowed && !falseDenial && !rule.shadow && rule.algorithm !== 'concurrency' && !settlesAfterAnswer(rule)) {
          cache?.remember(
            key,
            outcome,
            chargedCost(rule, cost),
            federated && FEDERATED_ALGORITHMS.has(rule.algorithm) ? config.federation.syncIntervalMs : Infinity,
          );
        }
      });
    }
    const decision: Decision = { allowed, outcomes, binding: bindingOutcome(outcomes), leases };
    if (settlesSome && allowed && !peek) {
      const calls = results
        .map((result) => ({
          shard: result.group.shard,
          now: result.reply.now,
          rules: result.group.rules.filter((entry) => settlesAfterAnswer(entry.rule)).map(({ rule, key }) => ({ rule, key })),
        }))
        .filter((call) => call.rules.length > 0);
      if (calls.length > 0) decision.refund = { id: randomUUID(), cost, leaseId, calls };
    }
    return decision;
  };

  const settleResponse = async (decision: Decision, status: number, reported?: ReportedCost): Promise<number> => {
    const ticket = decision.refund;
    if (ticket === undefined) return 0;
    const refunds: Promise<number>[] = [];
    for (const call of ticket.calls) {
      for (const { rule, key } of call.rules) {
        const charged = chargedCost(rule, ticket.cost);
        const settlement = ruleSettlement(rule, charged, status, reported);
        if (settlement.outcome !== undefined) responseCostsTotal.inc({ rule: rule.name, outcome: settlement.outcome });
        if (settlement.outcome === 'overrun') responseCostOverrunTotal.inc({ rule: rule.name }, settlement.actual! - charged);
        if (settlement.refund <= 0) continue;
        // One call per rule, its marker named by the ticket and the rule (a request matches a rule once): a rule's
        // admission is refunded once, whatever amount a second settlement of the same ticket would name.
        const marker = keys.refundMarkerKey(call.shard, `${ticket.id}.${rule.name}`);
        const refund = [refundRuleOf(key, rule)];
        refunds.push(
          runRefund(redis, refundCall(topology.selfIndex, call.now, refund, settlement.refund, ticket.leaseId, marker)).then((count) => {
            if (count > 0) responseRefundsTotal.inc({ rule: rule.name });
            return count;
          }),
        );
      }
    }
    const refunded = await Promise.all(refunds);
    return refunded.reduce((total, count) => total + count, 0);
  };

  const settle = async (items: readonly Unsettled[]): Promise<void> => {
    const byShard = new Map<number, Unsettled[]>();
    for (const item of items) {
      const list = byShard.get(item.shard) ?? [];
      list.push(item);
      byShard.set(item.shard, list);
    }
    try {
      await Promise.all(
        [...byShard].map(([shard, list]) => {
          const pending = federated ? topology.peerIndexes.map((peer) => keys.peerPendingKey(shard, peer)) : [];
          const items = list.map((item) => ({ key: item.key, period: item.rule.period, windowStart: item.windowStart, count: item.count }));
          return runSettleFallback(redis, settleFallbackCall(topology, regions, pending, items));
        }),
      );
    } catch (error) {
      throw storeError(error);
    }
  };

  return {
    topology,
    rules: config.rules,
    decideMatched,
    cached,
    settle,
    forget: (keys) => {
      cache?.forget(keys);
      localLeases?.forget(keys);
    },
    settleResponse,
    async decide(request: RequestContext): Promise<Decision> {
      return decideMatched(matchRules(config, request), request);
    },

    async release(leases: readonly Lease[]): Promise<void> {
      try {
        await Promise.all(leases.map((lease) => runReleaseLeases(redis, releaseLeasesCall(lease))));
      } catch (error) {
        throw storeError(error);
      }
    },

    async close(): Promise<void> {
      cache?.clear();
      if (localLeases) {
        clearInterval(leaseSweep);
        await giveBack(localLeases.drain());
      }
    },
  };
}

// The decision engine against the region's Redis: one atomic decide.lua call per identity (cluster slot),
// a refund when a request spans identities and one of them denies, and a local over-limit cache that
// answers callers known to be exhausted without a Redis hop.
import { randomUUID } from 'node:crypto';
import { FEDERATED_ALGORITHMS, type Algorithm, type Config } from '../config/schema.ts';
import { scriptBudget, topologyOf, type Topology } from '../federation/topology.ts';
import { peerPendingKey, shardMarkerKey, shardOf } from '../keys.ts';
import { StoreUnavailableError } from './errors.ts';
import { createOverLimitCache, type OverLimitCache } from './over-limit-cache.ts';
import type { RegionRedis } from './redis-client.ts';
import { matchRules, type MatchedRule } from './rules.ts';
import { withScripts, type ScriptedRedis } from './scripts.ts';
import type { Decision, DecisionEngine, Lease, RequestContext, RuleOutcome } from './types.ts';

export const ALGORITHM_CODES: Record<Algorithm, string> = {
  tokenBucket: 'tb',
  fixedWindow: 'fw',
  slidingWindow: 'sw',
  slidingLog: 'sl',
  concurrency: 'cc',
};

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

function groupByShard(matched: readonly MatchedRule[]): ShardGroup[] {
  const groups = new Map<number, ShardGroup>();
  for (const entry of matched) {
    const shard = shardOf(entry.principal);
    let group = groups.get(shard);
    if (!group) {
      group = { shard, rules: [] };
      groups.set(shard, group);
    }
    group.rules.push(entry);
  }
  return [...groups.values()];
}

/** The binding outcome: a denying enforcing rule (longest wait first), else the least remaining. */
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
    if (!outcome.allowed ? outcome.retryAfterMs > binding.retryAfterMs : outcome.remaining < binding.remaining) binding = outcome;
  }
  return binding ?? outcomes[0];
}

function toNumber(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

function storeError(error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(`Redis could not decide: ${message}`, { cause: error });
}

export function createRedisEngine(options: RedisEngineOptions): DecisionEngine & { readonly topology: Topology } {
  const { config } = options;
  const redis: ScriptedRedis = withScripts(options.redis);
  const topology = topologyOf(config);
  const federated = topology.regions.length > 1;
  const cacheOption = options.overLimitCache ?? true;
  const cache: OverLimitCache | undefined =
    cacheOption === false ? undefined : createOverLimitCache(cacheOption === true ? 100_000 : cacheOption.maxEntries);
  const regions = federated ? topology.regions.length : 1;
  const budgets = new Map(config.rules.map((rule) => [rule.name, scriptBudget(rule, config.federation.leakageBudget, regions)]));

  const decideGroup = async (group: ShardGroup, cost: number, leaseId: string) => {
    const keys = [shardMarkerKey(group.shard)];
    if (federated) for (const peer of topology.peerIndexes) keys.push(peerPendingKey(group.shard, peer));
    const args: (string | number)[] = [
      topology.selfIndex,
      regions,
      topology.unitsCsv,
      topology.maxClockSkewMs,
      group.rules.length,
      options.nowMs ? options.nowMs() : '',
    ];
    for (const { rule, key } of group.rules) {
      keys.push(key);
      args.push(
        ALGORITHM_CODES[rule.algorithm],
        rule.limit,
        rule.period,
        rule.burst ?? rule.limit,
        cost,
        budgets.get(rule.name) ?? 0,
        rule.leaseTtl,
        leaseId,
        rule.shadow ? 1 : 0,
      );
    }
    const reply = (await redis.decide(keys.length, ...keys, ...args)) as unknown[];
    return { group, allAllowed: toNumber(reply[0]) === 1, now: toNumber(reply[1]), values: reply.slice(2).map(toNumber) };
  };

  const refund = async (result: Awaited<ReturnType<typeof decideGroup>>, cost: number, leaseId: string) => {
    const keys = result.group.rules.map((entry) => entry.key);
    const args: (string | number)[] = [topology.selfIndex, result.now];
    for (const { rule } of result.group.rules) args.push(ALGORITHM_CODES[rule.algorithm], rule.period, cost, leaseId);
    await redis.refund(keys.length, ...keys, ...args);
  };

  return {
    topology,
    async decide(request: RequestContext): Promise<Decision> {
      const cost = request.cost ?? 1;
      const matched = matchRules(config, request);
      if (matched.length === 0) return { allowed: true, outcomes: [], binding: undefined, leases: [] };

      const cached = cache?.lookup(matched, cost);
      if (cached) return { allowed: false, outcomes: [cached], binding: cached, leases: [] };

      const needsLease = matched.some((entry) => entry.rule.algorithm === 'concurrency' || entry.rule.algorithm === 'slidingLog');
      const leaseId = needsLease ? randomUUID() : '';
      let results: Awaited<ReturnType<typeof decideGroup>>[];
      try {
        results = await Promise.all(groupByShard(matched).map((group) => decideGroup(group, cost, leaseId)));
      } catch (error) {
        throw storeError(error);
      }
      const allowed = results.every((result) => result.allAllowed);
      if (!allowed && results.length > 1) {
        try {
          await Promise.all(results.filter((result) => result.allAllowed).map((result) => refund(result, cost, leaseId)));
        } catch (error) {
          throw storeError(error);
        }
      }

      const outcomes: RuleOutcome[] = [];
      const leases: Lease[] = [];
      for (const result of results) {
        result.group.rules.forEach(({ rule, key }, index) => {
          const [ruleAllowed, remaining, resetAtMs, retryAfterMs] = result.values.slice(index * 4, index * 4 + 4) as [number, number, number, number];
          const outcome: RuleOutcome = {
            rule: rule.name,
            algorithm: rule.algorithm,
            allowed: ruleAllowed === 1,
            limit: rule.algorithm === 'tokenBucket' ? (rule.burst ?? rule.limit) : rule.limit,
            remaining,
            resetAtMs,
            retryAfterMs,
            periodMs: rule.period,
            shadow: rule.shadow,
            failMode: rule.failMode,
            source: 'redis',
          };
          outcomes.push(outcome);
          if (allowed && outcome.allowed && rule.algorithm === 'concurrency') leases.push({ key, id: leaseId, slots: cost });
          if (!outcome.allowed && !rule.shadow && rule.algorithm !== 'concurrency') {
            cache?.remember(key, outcome, cost, federated && FEDERATED_ALGORITHMS.has(rule.algorithm) ? config.federation.syncIntervalMs : Infinity);
          }
        });
      }
      return { allowed, outcomes, binding: bindingOutcome(outcomes), leases };
    },

    async release(leases: readonly Lease[]): Promise<void> {
      try {
        await Promise.all(leases.map((lease) => redis.releaseLeases(1, lease.key, lease.id, lease.slots)));
      } catch (error) {
        throw storeError(error);
      }
    },

    async close(): Promise<void> {
      cache?.clear();
    },
  };
}

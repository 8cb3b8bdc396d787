// The watch sweep (sweep_watch.lua): keys whose view showed a hungry peer are rebalanced again each sync round,
// since a starved peer's denials send nothing.
import type { Logger } from 'pino';
import { FEDERATED_ALGORITHMS, type Config, type Rule } from '../../config/schema.ts';
import { runSweepWatch, sweepCall } from '../../store/gossip-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import { KEY_SHARDS, STATE_KEY_PATTERN, ruleNameOf, watchSetKey } from '../../keys.ts';
import type { FederationMetrics } from '../metrics.ts';
import type { Topology } from '../../protocol/index.ts';

/** Watched keys swept per shard and round: bounds one round's work (a random sample when there are more). */
const SWEEP_KEYS_PER_SHARD = 256;

/**
 * Rebalances the watched keys of every shard once (the sync loop's sweep); returns the keys rebalanced.
 * `onStranded` hears, per rule, the allowance left unused in windows that end before the next sweep while a
 * peer is hungry.
 */
export async function sweepWatched(
  redis: ScriptedRedis,
  config: Config,
  topology: Topology,
  onStranded?: (rule: string, amount: number) => void,
): Promise<number> {
  const rules = new Map(config.rules.filter((rule) => FEDERATED_ALGORITHMS.has(rule.algorithm)).map((rule) => [rule.name, rule]));
  const members = await Promise.all(
    Array.from({ length: KEY_SHARDS }, (_, shard) => redis.srandmember(watchSetKey(shard), SWEEP_KEYS_PER_SHARD)),
  );
  const swept = await Promise.all(
    members.map(async (keys, shard) => {
      if (keys.length === 0) return 0;
      const watched: { key: string; rule: Rule }[] = [];
      const stale: string[] = [];
      for (const key of keys) {
        const rule = STATE_KEY_PATTERN.test(key) ? rules.get(ruleNameOf(key)) : undefined;
        if (rule) watched.push({ key, rule });
        else stale.push(key);
      }
      // A key of a rule that is gone (or no longer federated) has nothing to rebalance.
      if (stale.length > 0) await redis.srem(watchSetKey(shard), ...stale);
      if (watched.length === 0) return 0;
      const call = sweepCall(topology, shard, watched, config.federation.leakageBudget, {
        strandedHorizonMs: config.federation.syncIntervalMs,
      });
      const reply = await runSweepWatch(redis, call);
      reply.stranded.forEach((amount, i) => {
        if (amount > 0) onStranded?.(watched[i]!.rule.name, amount);
      });
      return reply.rebalanced;
    }),
  );
  return swept.reduce((a, b) => a + b, 0);
}

export interface WatchSweepDeps {
  /** This region (the label of the stranded-allowance metric). */
  region: string;
  /** The rules in force now (a policy reload changes them). */
  currentConfig: () => Config;
  topology: Topology;
  redis: ScriptedRedis;
  metrics: FederationMetrics;
  logger: Logger;
}

/** One sweep of the watch sets with the rules in force, stranded allowance counted; never throws. */
export function createWatchSweep({ region, currentConfig, topology, redis, metrics, logger }: WatchSweepDeps): () => Promise<void> {
  return async () => {
    try {
      await sweepWatched(redis, currentConfig(), topology, (rule, amount) => metrics.stranded.inc({ region, rule }, amount));
    } catch (error) {
      // Local Redis trouble: the watched keys stay watched and the next round sweeps them.
      logger.debug({ event: 'federation.sweep_failed', error: (error as Error).message }, 'could not sweep the watch sets');
    }
  };
}

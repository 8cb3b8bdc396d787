// The watch sweep (sweep_watch.lua): keys whose view showed a hungry peer are rebalanced again each sync round,
// since a starved peer's denials send nothing. A round looks only at the shards whose watch set had keys at the
// last look or whose bell rang since (dirty-shards.ts). A shard whose watched keys are all active holders of their
// idle peers' share (a hot key's region) is put off for as long as the sweep says nothing can change there
// (protocol.ts bucketSweepIdleUntil: until the holder falls quiet or the epoch's returning span): a merge that changes
// one of them rings the shard's bell for the sweep and brings it back at once.
import type { Logger } from 'pino';
import { FEDERATED_ALGORITHMS, type Config, type Rule } from '../../config/schema.ts';
import { runSweepWatch, sweepCall } from '../../store/gossip-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import { KEY_SHARDS, layoutOf, ruleNameOf } from '../../keys.ts';
import type { FederationMetrics } from '../metrics.ts';
import type { Topology } from '../../protocol/index.ts';
import type { DirtyShards } from './dirty-shards.ts';

/** Watched keys swept per shard and round: bounds one round's work (a random sample when there are more). */
const SWEEP_KEYS_PER_SHARD = 256;

/** What one sweep did: keys rebalanced, the shards where it rebalanced any, and the shards still watched. */
export interface SweepOutcome {
  rebalanced: number;
  changed: number[];
  /** Shards still watched, each with how long (ms) its sweep can change nothing (0: sweep it next round). */
  watched: { shard: number; quietForMs: number }[];
}

const ALL_SHARDS: readonly number[] = Array.from({ length: KEY_SHARDS }, (_, shard) => shard);

/**
 * Rebalances the watched keys of `shards` (every shard when omitted) once. `onStranded` hears, per rule, the
 * allowance left unused in windows that end before the next sweep while a peer is hungry.
 */
export async function sweepShards(
  redis: ScriptedRedis,
  config: Config,
  topology: Topology,
  shards: readonly number[] = ALL_SHARDS,
  onStranded?: (rule: string, amount: number) => void,
): Promise<SweepOutcome> {
  const keys = layoutOf(config);
  const rules = new Map(config.rules.filter((rule) => FEDERATED_ALGORITHMS.has(rule.algorithm)).map((rule) => [rule.name, rule]));
  const members = await Promise.all(shards.map((shard) => redis.srandmember(keys.watchSetKey(shard), SWEEP_KEYS_PER_SHARD)));
  const watched: SweepOutcome['watched'] = [];
  const changed: number[] = [];
  const swept = await Promise.all(
    members.map(async (sample, i) => {
      const shard = shards[i]!;
      if (sample.length === 0) return 0;
      const live: { key: string; rule: Rule }[] = [];
      const stale: string[] = [];
      for (const key of sample) {
        const rule = keys.statePattern.test(key) ? rules.get(ruleNameOf(key)) : undefined;
        if (rule) live.push({ key, rule });
        else stale.push(key);
      }
      // A key of a rule that is gone (or no longer federated) has nothing to rebalance.
      if (stale.length > 0) await redis.srem(keys.watchSetKey(shard), ...stale);
      // A full sample may have left keys unseen: swept again next round.
      const full = sample.length >= SWEEP_KEYS_PER_SHARD;
      if (full) watched.push({ shard, quietForMs: 0 });
      if (live.length === 0) return 0;
      const call = sweepCall(keys, topology, shard, live, config.federation.leakageBudget, {
        strandedHorizonMs: config.federation.syncIntervalMs,
      });
      const reply = await runSweepWatch(redis, call);
      if (!full && reply.unwatched < live.length) watched.push({ shard, quietForMs: reply.quietForMs });
      if (reply.rebalanced > 0) changed.push(shard);
      reply.stranded.forEach((amount, j) => {
        if (amount > 0) onStranded?.(live[j]!.rule.name, amount);
      });
      return reply.rebalanced;
    }),
  );
  return { rebalanced: swept.reduce((a, b) => a + b, 0), changed, watched };
}

/** Rebalances the watched keys of every shard once (what a sweep does); returns the keys rebalanced. */
export async function sweepWatched(
  redis: ScriptedRedis,
  config: Config,
  topology: Topology,
  onStranded?: (rule: string, amount: number) => void,
): Promise<number> {
  return (await sweepShards(redis, config, topology, ALL_SHARDS, onStranded)).rebalanced;
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
  /** The shards to look at. */
  dirty: DirtyShards;
}

/** One sweep of the watch sets with the rules in force, stranded allowance counted; never throws. */
export function createWatchSweep({ region, currentConfig, topology, redis, metrics, logger, dirty }: WatchSweepDeps): () => Promise<void> {
  let sweptWith: Config | undefined;
  return async () => {
    const config = currentConfig();
    // Other rules (a reload, or a peer's tighter terms) have other quiet spans: every shard put off is looked at.
    if (config !== sweptWith) {
      dirty.keep('watch', ALL_SHARDS);
      sweptWith = config;
    }
    const shards = dirty.take('watch');
    if (shards.length === 0) return;
    try {
      const outcome = await sweepShards(redis, config, topology, shards, (rule, amount) => metrics.stranded.inc({ region, rule }, amount));
      // Shards still watched are swept again next round, or once their quiet span is over. What was rebalanced is
      // pending now: the sync round that follows sends it without waiting for the bell the sweep rang.
      for (const { shard, quietForMs } of outcome.watched) {
        if (quietForMs > 0) dirty.defer('watch', shard, quietForMs);
        else dirty.keep('watch', [shard]);
      }
      for (const shard of outcome.changed) dirty.mark(shard);
    } catch (error) {
      // Local Redis trouble: the watched keys stay watched and the next round sweeps every shard.
      dirty.markAll();
      logger.debug({ event: 'federation.sweep_failed', error: (error as Error).message }, 'could not sweep the watch sets');
    }
  };
}

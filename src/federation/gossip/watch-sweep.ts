// The watch sweep (sweep_watch.lua): keys whose view showed a hungry peer are rebalanced again each sync round,
// since a starved peer's denials send nothing. A round looks only at the shards whose watch set had keys at the
// last look or whose bell rang since (dirty-shards.ts).
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
  watched: number[];
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
  const watched: number[] = [];
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
      // A full sample may have left keys unseen.
      if (sample.length >= SWEEP_KEYS_PER_SHARD) watched.push(shard);
      if (live.length === 0) return 0;
      const call = sweepCall(keys, topology, shard, live, config.federation.leakageBudget, {
        strandedHorizonMs: config.federation.syncIntervalMs,
      });
      const reply = await runSweepWatch(redis, call);
      if (sample.length < SWEEP_KEYS_PER_SHARD && reply.unwatched < live.length) watched.push(shard);
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
  /** Clock of the sweep's pacing (tests). */
  now?: () => number;
}

/** The longest a watched shard waits between sweeps that rebalance nothing, in sync intervals. */
export const MAX_SWEEP_BACKOFF_ROUNDS = 8;

/** When each watched shard is swept next (createSweepPacer). */
export interface SweepPacer {
  /** The shards of `shards` due at `at`; the others wait. */
  due(shards: readonly number[], at: number): { due: number[]; waiting: number[] };
  /** After a sweep of `swept`: those in `changed` are due next round, the others still `watched` back off. */
  swept(swept: readonly number[], changed: readonly number[], watched: readonly number[]): void;
  /** Everything due at once (a flush). */
  reset(): void;
}

/**
 * When each watched shard is swept next. A sweep that rebalanced nothing in a shard doubles that shard's wait (1,
 * 2, 4, then MAX_SWEEP_BACKOFF_ROUNDS sync intervals); one that rebalanced something, a newly watched shard, and a
 * forced round sweep at once. A watched key that holds rights nobody needs (a free donor's grant, kept for the
 * epoch) would otherwise cost a full read and rebalance every sync interval for the rest of its epoch: at 1 M
 * Zipf keys, a third of the sending Redis's time. The bound does not depend on sweeps (they only move rights);
 * a donor that went idle after a hungry peer's last message notices it up to MAX_SWEEP_BACKOFF_ROUNDS intervals
 * later, while merges still rebalance at once.
 */
export function createSweepPacer(intervalMs: number, now: () => number): SweepPacer {
  const streaks = new Map<number, number>();
  const dueAt = new Map<number, number>();
  return {
    due(shards, at) {
      const due: number[] = [];
      const waiting: number[] = [];
      for (const shard of shards) ((dueAt.get(shard) ?? 0) <= at ? due : waiting).push(shard);
      return { due, waiting };
    },
    swept(swept, changed, watched) {
      const at = now();
      const productive = new Set(changed);
      const still = new Set(watched);
      for (const shard of swept) {
        if (!still.has(shard)) {
          streaks.delete(shard);
          dueAt.delete(shard);
          continue;
        }
        const streak = productive.has(shard) ? 0 : Math.min((streaks.get(shard) ?? 0) + 1, 30);
        streaks.set(shard, streak);
        const rounds = streak === 0 ? 0 : Math.min(2 ** (streak - 1), MAX_SWEEP_BACKOFF_ROUNDS);
        // Due a little before the round that many intervals later (timers fire late, never early).
        dueAt.set(shard, at + Math.max(0, rounds * intervalMs - intervalMs / 2));
      }
    },
    reset() {
      streaks.clear();
      dueAt.clear();
    },
  };
}

/**
 * One sweep of the watch sets with the rules in force, stranded allowance counted; never throws. `force` sweeps
 * every watched shard now, whatever its backoff (a flush).
 */
export function createWatchSweep({
  region,
  currentConfig,
  topology,
  redis,
  metrics,
  logger,
  dirty,
  now = Date.now,
}: WatchSweepDeps): (force?: boolean) => Promise<void> {
  const pacer = createSweepPacer(currentConfig().federation.syncIntervalMs, now);
  return async (force = false) => {
    if (force) pacer.reset();
    const { due: shards, waiting } = pacer.due(dirty.take('watch'), now());
    dirty.keep('watch', waiting);
    if (shards.length === 0) return;
    try {
      const outcome = await sweepShards(redis, currentConfig(), topology, shards, (rule, amount) =>
        metrics.stranded.inc({ region, rule }, amount),
      );
      pacer.swept(shards, outcome.changed, outcome.watched);
      // Shards still watched are swept again (when the pacer says). What was rebalanced is pending now: the sync
      // round that follows sends it without waiting for the bell the sweep rang.
      dirty.keep('watch', outcome.watched);
      for (const shard of outcome.changed) dirty.mark(shard);
    } catch (error) {
      // Local Redis trouble: the watched keys stay watched and the next round sweeps every shard.
      dirty.markAll();
      logger.debug({ event: 'federation.sweep_failed', error: (error as Error).message }, 'could not sweep the watch sets');
    }
  };
}

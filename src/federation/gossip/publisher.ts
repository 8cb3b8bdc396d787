// The sending half of gossip. Each round first sweeps the watch sets (sweep_watch.lua: keys whose view showed a
// hungry peer are rebalanced again, since a starved peer's denials send nothing). Then, for each peer in
// parallel: read up to maxBatchKeys pending keys with their current state (take_pending.lua, over the 64
// shards), send them as one job to the peer's `gossip` queue, and only after the add resolved forget them
// (ack_pending.lua, version-guarded). A failed add leaves everything pending: nothing is lost, and the backlog
// stays bounded by the number of keys because newer state supersedes older unsent state.
import type { Logger } from 'pino';
import { FEDERATED_ALGORITHMS, type Config, type Rule } from '../../config/schema.ts';
import { withDeadline } from '../../deadline.ts';
import { ackPendingCall, runAckPending, runSweepWatch, runTakePending, sweepCall, takePendingCall } from '../../store/gossip-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import { KEY_SHARDS, STATE_KEY_PATTERN, fastSetKey, peerPendingKey, ruleNameOf, shardOfKey, watchSetKey } from '../../keys.ts';
import type { FederationMetrics } from '../metrics.ts';
import type { PeerBook } from '../peers.ts';
import type { Topology } from '../topology.ts';
import { decodeState, flattenSlot } from './cells.ts';
import { LIMITS, MESSAGE_VERSION, sign, type GossipEntry, type GossipMessage, type MessageKind } from './message.ts';
import type { PeerLink } from './peer-link.ts';

export interface PublisherDeps {
  config: Config;
  /** The rules in force now (a policy reload changes them); `config` otherwise. */
  currentConfig?: () => Config;
  topology: Topology;
  redis: ScriptedRedis;
  links: readonly PeerLink[];
  metrics: FederationMetrics;
  peers: PeerBook;
  logger: Logger;
  /** Upper bound on one add to a peer (a frozen peer must not stall the loop). */
  addTimeoutMs: number;
  /** Send a heartbeat when nothing was sent to a peer for this long. */
  heartbeatMs: number;
}

export interface Publisher {
  /** One publishing round to every peer; never throws (failures are counted per peer). */
  round(): Promise<void>;
  /**
   * The fast lane: send the keys queued in the fast-lane sets (decide.lua: a first admission in a window/epoch;
   * apply_gossip.lua: a grant) to every peer now, then forget them in the pending sets where that version is
   * still the newest. Run every FAST_LANE_MS, so one key goes out at most that often; never throws.
   */
  fastRound(): Promise<number>;
  /** Ask every peer to send everything again (after this region lost data); retried each round until sent. */
  requestResync(): void;
  /** Keys pending per peer, sampled from the pending sets (also updates the backlog gauge). */
  sampleBacklog(): Promise<Map<number, number[]>>;
}

/** How often the fast lane runs (and so the least time between two fast sends of one key). */
export const FAST_LANE_MS = 20;

/** Keys taken from one shard's fast-lane set per fast round. */
const FAST_KEYS_PER_SHARD = 64;

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

/** A job with its JSON size, measured once (the size check and the bytes metric both need it). */
interface Outgoing {
  message: GossipMessage;
  bytes: number;
}

function measured(message: GossipMessage): Outgoing {
  return { message, bytes: JSON.stringify(message).length };
}

/** Splits a batch until each job's JSON fits the receiver's byte bound. */
function fitToSize(entries: GossipEntry[], build: (chunk: GossipEntry[]) => GossipMessage): Outgoing[] {
  const job = measured(build(entries));
  if (entries.length <= 1 || job.bytes <= LIMITS.maxBytes * 0.9) return [job];
  const half = Math.ceil(entries.length / 2);
  return [...fitToSize(entries.slice(0, half), build), ...fitToSize(entries.slice(half), build)];
}

export function createPublisher(deps: PublisherDeps): Publisher {
  const { config, topology, redis, links, metrics, peers, logger } = deps;
  const region = config.region;
  const n = topology.regions.length;
  const maxKeys = Math.min(config.federation.maxBatchKeys, LIMITS.maxEntries);
  const lastSent = new Map<string, number>();
  const resyncWanted = new Set<string>();
  let rotation = 0;
  let lastSeq = 0;

  // µs-clock based, so a restarted (or wiped) sender continues above every number it sent before.
  const nextSeq = () => {
    lastSeq = Math.max(lastSeq + 1, Date.now() * 1000);
    return lastSeq;
  };

  const build = (link: PeerLink, kind: MessageKind, entries: GossipEntry[]): GossipMessage =>
    sign(
      { v: MESSAGE_VERSION, kind, from: region, to: link.name, fp: topology.fingerprint, seq: nextSeq(), sentAt: Date.now(), entries },
      config.federation.secret,
    );

  /** Adds the jobs in order; false (and the link marked down) at the first failure. */
  const send = async (link: PeerLink, jobs: Outgoing[]): Promise<boolean> => {
    for (const { message, bytes } of jobs) {
      try {
        await withDeadline(link.add(message), deps.addTimeoutMs, `gossip add to ${link.name}`);
      } catch (error) {
        peers.failed(link.name, error);
        return false;
      }
      const now = Date.now();
      lastSent.set(link.name, now);
      peers.sent(link.name, now);
      metrics.batches.inc({ region, peer: link.name, direction: 'sent' });
      metrics.bytes.inc({ region, peer: link.name, direction: 'sent' }, bytes);
    }
    return true;
  };

  const sampleBacklog = async (): Promise<Map<number, number[]>> => {
    const counts = new Map<number, number[]>();
    await Promise.all(
      links.map(async (link) => {
        const perShard = await Promise.all(
          Array.from({ length: KEY_SHARDS }, (_, shard) => redis.zcard(peerPendingKey(shard, link.index))),
        );
        counts.set(link.index, perShard);
        peers.backlog(
          link.name,
          perShard.reduce((a, b) => a + b, 0),
        );
      }),
    );
    return counts;
  };

  const publishTo = async (link: PeerLink, perShard: readonly number[], start: number): Promise<void> => {
    if (resyncWanted.has(link.name)) {
      if (!(await send(link, [measured(build(link, 'resync', []))]))) return;
      resyncWanted.delete(link.name);
      const status = peers.get(link.name);
      if (status) status.resyncPending = false;
      logger.info({ event: 'federation.resync_requested', peer: link.name }, `asked ${link.name} to resend everything`);
    }

    // Spread the batch over the shards that have something, starting at a rotating shard for fairness.
    const allotted: [number, number][] = [];
    let budget = maxKeys;
    for (let i = 0; i < KEY_SHARDS && budget > 0; i++) {
      const shard = (start + i) % KEY_SHARDS;
      const take = Math.min(perShard[shard] ?? 0, budget);
      if (take > 0) allotted.push([shard, take]);
      budget -= take;
    }

    const entries: GossipEntry[] = [];
    const acks = new Map<number, { key: string; version: string }[]>();
    const replies = await Promise.all(allotted.map(([shard, take]) => runTakePending(redis, takePendingCall(shard, link.index, take))));
    allotted.forEach(([shard], i) => {
      const ack: { key: string; version: string }[] = [];
      for (const { key, version, fields } of replies[i]!) {
        ack.push({ key, version });
        // An expired key has nothing left to say; it is only forgotten.
        if (fields.length === 0) continue;
        const state = decodeState(fields, n);
        if (state.slots.length > 0) entries.push({ k: key, t: state.changedAt, s: state.slots.map(flattenSlot) });
      }
      acks.set(shard, ack);
    });

    if (entries.length > 0) {
      if (
        !(await send(
          link,
          fitToSize(entries, (chunk) => build(link, 'gossip', chunk)),
        ))
      )
        return;
    } else if (Date.now() - (lastSent.get(link.name) ?? 0) >= deps.heartbeatMs) {
      await send(link, [measured(build(link, 'heartbeat', []))]);
    }
    await Promise.all(
      [...acks].filter(([, ack]) => ack.length > 0).map(([shard, ack]) => runAckPending(redis, ackPendingCall(shard, link.index, ack))),
    );
  };

  const fastRound = async (): Promise<number> => {
    try {
      // One command per shard (their keys live in different cluster slots), issued together.
      const perShard = await Promise.all(
        Array.from({ length: KEY_SHARDS }, (_, shard) => redis.spop(fastSetKey(shard), FAST_KEYS_PER_SHARD)),
      );
      const popped = perShard.flat();
      if (popped.length === 0) return 0;
      const states = await Promise.all(popped.map((key) => redis.hgetall(key)));
      const entries: GossipEntry[] = [];
      const versions: [string, number][] = [];
      states.forEach((fields, i) => {
        const state = decodeState(fields, n);
        if (state.slots.length === 0) return;
        entries.push({ k: popped[i]!, t: state.changedAt, s: state.slots.map(flattenSlot) });
        versions.push([popped[i]!, state.version]);
      });
      if (entries.length === 0) return 0;
      await Promise.all(
        links.map(async (link) => {
          if (
            !(await send(
              link,
              fitToSize(entries, (chunk) => build(link, 'gossip', chunk)),
            ))
          )
            return;
          metrics.fastLane.inc({ region, peer: link.name }, entries.length);
          // Sent: forget each key in this peer's pending set if that version is still the newest.
          const byShard = new Map<number, { key: string; version: string }[]>();
          for (const [key, version] of versions) {
            const shard = shardOfKey(key);
            const ack = byShard.get(shard) ?? [];
            ack.push({ key, version: String(version) });
            byShard.set(shard, ack);
          }
          await Promise.all([...byShard].map(([shard, ack]) => runAckPending(redis, ackPendingCall(shard, link.index, ack))));
        }),
      );
      return entries.length;
    } catch (error) {
      // Local Redis trouble: the keys are still pending and go out with the next sync round.
      logger.debug({ event: 'federation.fast_lane_failed', error: (error as Error).message }, 'fast lane round failed');
      return 0;
    }
  };

  return {
    sampleBacklog,
    fastRound,
    requestResync() {
      for (const link of links) {
        resyncWanted.add(link.name);
        const status = peers.get(link.name);
        if (status) status.resyncPending = true;
      }
    },
    async round() {
      try {
        await sweepWatched(redis, deps.currentConfig?.() ?? config, topology, (rule, amount) =>
          metrics.stranded.inc({ region, rule }, amount),
        );
      } catch (error) {
        // Local Redis trouble: the watched keys stay watched and the next round sweeps them.
        logger.debug({ event: 'federation.sweep_failed', error: (error as Error).message }, 'could not sweep the watch sets');
      }
      let counts: Map<number, number[]>;
      try {
        counts = await sampleBacklog();
      } catch (error) {
        logger.debug({ event: 'federation.backlog_failed', error: (error as Error).message }, 'could not read the pending sets');
        return;
      }
      const start = rotation;
      rotation = (rotation + 1) % KEY_SHARDS;
      await Promise.all(
        links.map((link) =>
          publishTo(link, counts.get(link.index) ?? [], start).catch((error: unknown) => {
            // Local Redis trouble (not the link): the keys stay pending and the next round tries again.
            logger.warn(
              { event: 'federation.publish_failed', peer: link.name, error: (error as Error).message },
              'publishing round failed',
            );
          }),
        ),
      );
    },
  };
}

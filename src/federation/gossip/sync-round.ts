// The sync round, for each peer in parallel: read up to maxBatchKeys pending keys with their current state
// (take_pending.lua, over the 64 shards), send them as one job to the peer's `gossip` queue, and only after the
// add resolved forget them (ack_pending.lua, version-guarded). A failed add leaves everything pending: nothing is
// lost, and the backlog stays bounded by the number of keys because newer state supersedes older unsent state.
// A peer asked to resend everything gets a `resync` first; an idle peer gets a heartbeat.
// The fast lane pulls a peer's round forward (flush): its keys go in one job with everything pending for that
// peer, and the next timed round leaves the peer out when that was less than one sync interval ago. A peer so gets
// about one job per round whichever lane fills it, and a pending key waits at most two intervals.
// Only shards dirty for the peer (dirty-shards.ts: their bell rang) are taken from, an equal part of a batch from
// each, in one round trip that also counts them; a shard stays dirty while a take left keys behind or the send
// failed, and the backlog gauge sums the known counts.
import type { Logger } from 'pino';
import type { Config } from '../../config/schema.ts';
import {
  ackPendingCall,
  runAckPending,
  runTakePending,
  takePendingCall,
  type PendingKey,
  type TakenPending,
} from '../../store/gossip-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import { KEY_SHARDS, layoutOf } from '../../keys.ts';
import type { PeerBook } from '../peers.ts';
import type { Topology } from '../../protocol/index.ts';
import { decodeState, flattenSlot } from './cells.ts';
import type { DirtyShards } from './dirty-shards.ts';
import type { InFlight } from './in-flight.ts';
import { LIMITS, type GossipEntry } from './message.ts';
import type { PeerLink } from './peer-link.ts';
import { fitToSize, type Sender } from './sender.ts';

export interface SyncRoundDeps {
  config: Config;
  topology: Topology;
  redis: ScriptedRedis;
  links: readonly PeerLink[];
  peers: PeerBook;
  logger: Logger;
  sender: Sender;
  /** Send a heartbeat when nothing was sent to a peer for this long. */
  heartbeatMs: number;
  /** The shards to look at, per peer. */
  dirty: DirtyShards;
  /** The keys the lanes have in flight (shared with the fast lane). */
  inFlight: InFlight;
}

/** What a round took of a peer's pending keys: the shards taken from, each one's keys, whether none was left. */
interface Taken {
  shards: number[];
  replies: PendingKey[][];
  complete: boolean;
}

/** Keys another lane has read, claimed (in-flight.ts) and wants sent with a peer's round, and their acks by shard. */
export interface Riders {
  entries: GossipEntry[];
  acks: Map<number, { key: string; version: string }[]>;
}

export interface SyncRound {
  /**
   * One round to every peer; never throws (failures are counted per peer, local trouble logged). A timed round
   * (force false) leaves out a peer flushed less than one interval ago; a forced one sends to every peer.
   */
  run(force?: boolean): Promise<void>;
  /**
   * The peer's round now, with `riders` first in its job: true when sent, false when the send failed (all stays
   * pending). While a round to that peer runs or a resync waits, the riders go on their own (that round takes the
   * rest). Throws on local Redis trouble.
   */
  flush(link: PeerLink, riders: Riders): Promise<boolean>;
  /** Ask every peer to send everything again; retried each round until sent. */
  requestResync(): void;
  /** Keys pending per peer, counted in every pending set (also updates the backlog gauge). */
  sampleBacklog(): Promise<Map<number, number[]>>;
}

export function createSyncRound({
  config,
  topology,
  redis,
  links,
  peers,
  logger,
  sender,
  heartbeatMs,
  dirty,
  inFlight,
}: SyncRoundDeps): SyncRound {
  const keys = layoutOf(config);
  const n = topology.regions.length;
  const maxKeys = Math.min(config.federation.maxBatchKeys, LIMITS.maxEntries);
  // A timed round leaves out a peer the fast lane flushed less than one sync interval ago.
  const intervalMs = config.federation.syncIntervalMs;
  const resyncWanted = new Set<string>();
  // Per peer: the pending count of each shard as last counted, less what was forgotten since.
  const known = new Map<number, number[]>(links.map((link) => [link.index, new Array<number>(KEY_SHARDS).fill(0)]));
  // Rounds running now per peer, and when each peer was last flushed whole (nothing left behind) by the fast lane.
  const running = new Map<number, number>();
  const flushedAt = new Map<number, number>();

  const countsOf = (link: PeerLink): number[] => known.get(link.index)!;
  const reportBacklog = (link: PeerLink) =>
    peers.backlog(
      link.name,
      countsOf(link).reduce((a, b) => a + b, 0),
    );

  /** Counts every pending set of every peer (ZCARD), for the backlog gauge. */
  const sampleBacklog = async (): Promise<Map<number, number[]>> => {
    await Promise.all(
      links.map(async (link) => {
        const fresh = await Promise.all(
          Array.from({ length: KEY_SHARDS }, (_, shard) => redis.zcard(keys.peerPendingKey(shard, link.index))),
        );
        const counts = countsOf(link);
        fresh.forEach((pending, shard) => {
          counts[shard] = pending;
        });
        reportBacklog(link);
      }),
    );
    return new Map(links.map((link) => [link.index, [...countsOf(link)]]));
  };

  const enter = (link: PeerLink) => running.set(link.index, (running.get(link.index) ?? 0) + 1);
  const leave = (link: PeerLink) => running.set(link.index, running.get(link.index)! - 1);

  /** The peer's timed (or forced) round: what is pending for it in its dirty shards. */
  const publishTo = async (link: PeerLink): Promise<void> => {
    enter(link);
    try {
      await resyncAndDeliver(link);
    } finally {
      leave(link);
    }
  };

  const resyncAndDeliver = async (link: PeerLink): Promise<void> => {
    if (resyncWanted.has(link.name)) {
      if (!(await sender.send(link, [sender.build(link, 'resync', [])]))) return;
      resyncWanted.delete(link.name);
      const status = peers.get(link.name);
      if (status) status.resyncPending = false;
      logger.info({ event: 'federation.resync_requested', peer: link.name }, `asked ${link.name} to resend everything`);
    }
    await send(link, await takeFor(link));
  };

  /**
   * Sends what `takeFor` took, after the riders of a flush; its shards stay dirty where something stays pending (a
   * failed send, keys cut from the batch). A flush that took and sent everything marks the peer flushed.
   */
  const send = async (link: PeerLink, { shards, replies, complete }: Taken, riders?: Riders): Promise<boolean> => {
    let delivered: { sent: boolean; cut: Set<number> };
    try {
      delivered = await deliver(link, shards, replies, riders);
    } catch (error) {
      dirty.keep(link.index, shards);
      throw error;
    }
    if (!delivered.sent) {
      dirty.keep(link.index, shards);
      return false;
    }
    dirty.keep(link.index, delivered.cut);
    if (riders !== undefined && complete && delivered.cut.size === 0) flushedAt.set(link.index, Date.now());
    return true;
  };

  /**
   * Takes what is pending for the peer in its dirty shards (take_pending.lua, one call per shard, all at once): up
   * to an equal part of a batch from each, the part a shard's count would have allotted it unless the backlog is
   * uneven. The take reads each set's size too (the count that a round trip of ZCARDs made before), and a shard it
   * left keys in stays dirty for the next round.
   */
  const takeFor = async (link: PeerLink): Promise<Taken> => {
    const shards = dirty.take(link.index);
    if (shards.length === 0) return { shards, replies: [], complete: true };
    const part = Math.ceil(maxKeys / shards.length);
    let taken: TakenPending[];
    try {
      taken = await Promise.all(shards.map((shard) => runTakePending(redis, takePendingCall(keys, shard, link.index, part))));
    } catch (error) {
      dirty.keep(link.index, shards);
      throw error;
    }
    const counts = countsOf(link);
    const left: number[] = [];
    shards.forEach((shard, i) => {
      counts[shard] = taken[i]!.pending;
      if (taken[i]!.pending > taken[i]!.keys.length) left.push(shard);
    });
    reportBacklog(link);
    dirty.keep(link.index, left);
    return { shards, replies: taken.map((reply) => reply.keys), complete: left.length === 0 };
  };

  /**
   * Sends the keys taken from `shards` (replies in the same order) after the riders, or a heartbeat, and forgets
   * what was delivered; `sent` false when the send failed. A rider whose key was taken here at a newer version is
   * left out (the newer state goes). With riders, taken keys beyond the batch are left pending: their shards are
   * returned in `cut`.
   */
  const deliver = async (
    link: PeerLink,
    shards: readonly number[],
    replies: readonly PendingKey[][],
    riders?: Riders,
  ): Promise<{ sent: boolean; cut: Set<number> }> => {
    const entries: GossipEntry[] = [];
    const acks = new Map<number, { key: string; version: string }[]>();
    for (const [shard, ack] of riders?.acks ?? []) acks.set(shard, [...ack]);
    const room = maxKeys - (riders?.entries.length ?? 0);
    const cut = new Set<number>();
    const claimed: [key: string, version: number][] = [];
    shards.forEach((shard, i) => {
      const ack = acks.get(shard) ?? [];
      for (const { key, version, fields } of replies[i]!) {
        // An expired key has nothing left to say; it is only forgotten.
        if (fields.length === 0) {
          ack.push({ key, version });
          continue;
        }
        if (entries.length >= room) {
          cut.add(shard);
          continue;
        }
        const state = decodeState(fields, n);
        // In flight to this peer on the fast lane already (in-flight.ts): that lane sends and forgets it.
        if (!inFlight.claim(link.index, key, state.version)) continue;
        claimed.push([key, state.version]);
        ack.push({ key, version });
        if (state.slots.length > 0) entries.push({ k: key, t: state.changedAt, s: state.slots.map(flattenSlot) });
      }
      acks.set(shard, ack);
    });
    if (riders !== undefined) {
      const taken = new Set(entries.map((entry) => entry.k));
      entries.unshift(...riders.entries.filter((entry) => !taken.has(entry.k)));
    }
    try {
      return { sent: await sendAndForget(link, entries, acks), cut };
    } finally {
      for (const [key, version] of claimed) inFlight.release(link.index, key, version);
    }
  };

  /** Sends the entries (or a heartbeat) and forgets what was sent; false when the send failed. */
  const sendAndForget = async (
    link: PeerLink,
    entries: GossipEntry[],
    acks: Map<number, { key: string; version: string }[]>,
  ): Promise<boolean> => {
    if (entries.length > 0) {
      if (
        !(await sender.send(
          link,
          fitToSize(entries, (chunk) => sender.build(link, 'gossip', chunk)),
        ))
      )
        return false;
    } else if (Date.now() - sender.lastSentAt(link.name) >= heartbeatMs) {
      await sender.send(link, [sender.build(link, 'heartbeat', [])]);
    }
    const forgotten = await Promise.all(
      [...acks].map(
        async ([shard, ack]) =>
          [shard, ack.length > 0 ? await runAckPending(redis, ackPendingCall(keys, shard, link.index, ack)) : 0] as const,
      ),
    );
    // Delivered: what was forgotten leaves the count. A key that changed meanwhile stays pending (its change rang
    // the bell); a shard with keys still counted is counted again next round.
    const counts = countsOf(link);
    const again: number[] = [];
    for (const [shard, removed] of forgotten) {
      counts[shard] = Math.max(0, counts[shard]! - removed);
      if (counts[shard]! > 0) again.push(shard);
    }
    dirty.keep(link.index, again);
    reportBacklog(link);
    return true;
  };

  return {
    sampleBacklog,
    requestResync() {
      for (const link of links) {
        resyncWanted.add(link.name);
        const status = peers.get(link.name);
        if (status) status.resyncPending = true;
      }
    },
    async flush(link, riders) {
      if ((running.get(link.index) ?? 0) > 0 || resyncWanted.has(link.name))
        return send(link, { shards: [], replies: [], complete: false }, riders);
      enter(link);
      try {
        return await send(link, await takeFor(link), riders);
      } finally {
        leave(link);
      }
    },
    async run(force = false) {
      const now = Date.now();
      // Flushed by the fast lane less than an interval ago, or being flushed now: this peer's next round is the one
      // after (a forced round goes to every peer).
      const due = links.filter(
        (link) =>
          force ||
          resyncWanted.has(link.name) ||
          ((running.get(link.index) ?? 0) === 0 && now - (flushedAt.get(link.index) ?? 0) >= intervalMs),
      );
      await Promise.all(
        due.map((link) =>
          publishTo(link).catch((error: unknown) => {
            // Local Redis trouble (not the link): the keys stay pending and the next round looks at every shard.
            dirty.markAll();
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

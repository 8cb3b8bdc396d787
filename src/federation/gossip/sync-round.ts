// The sync round, for each peer in parallel: read up to maxBatchKeys pending keys with their current state
// (take_pending.lua, over the 64 shards), send them as one job to the peer's `gossip` queue, and only after the
// add resolved forget them (ack_pending.lua, version-guarded). A failed add leaves everything pending: nothing is
// lost, and the backlog stays bounded by the number of keys because newer state supersedes older unsent state.
// A peer asked to resend everything gets a `resync` first; an idle peer gets a heartbeat.
import type { Logger } from 'pino';
import type { Config } from '../../config/schema.ts';
import { ackPendingCall, runAckPending, runTakePending, takePendingCall } from '../../store/gossip-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import { KEY_SHARDS, peerPendingKey } from '../../keys.ts';
import type { PeerBook } from '../peers.ts';
import type { Topology } from '../../protocol/index.ts';
import { decodeState, flattenSlot } from './cells.ts';
import { LIMITS, type GossipEntry } from './message.ts';
import type { PeerLink } from './peer-link.ts';
import { fitToSize, measured, type Sender } from './sender.ts';

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
}

export interface SyncRound {
  /** One round to every peer; never throws (failures are counted per peer, local trouble logged). */
  run(): Promise<void>;
  /** Ask every peer to send everything again; retried each round until sent. */
  requestResync(): void;
  /** Keys pending per peer, sampled from the pending sets (also updates the backlog gauge). */
  sampleBacklog(): Promise<Map<number, number[]>>;
}

export function createSyncRound({ config, topology, redis, links, peers, logger, sender, heartbeatMs }: SyncRoundDeps): SyncRound {
  const n = topology.regions.length;
  const maxKeys = Math.min(config.federation.maxBatchKeys, LIMITS.maxEntries);
  const resyncWanted = new Set<string>();
  let rotation = 0;

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
      if (!(await sender.send(link, [measured(sender.build(link, 'resync', []))]))) return;
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
        !(await sender.send(
          link,
          fitToSize(entries, (chunk) => sender.build(link, 'gossip', chunk)),
        ))
      )
        return;
    } else if (Date.now() - sender.lastSentAt(link.name) >= heartbeatMs) {
      await sender.send(link, [measured(sender.build(link, 'heartbeat', []))]);
    }
    await Promise.all(
      [...acks].filter(([, ack]) => ack.length > 0).map(([shard, ack]) => runAckPending(redis, ackPendingCall(shard, link.index, ack))),
    );
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
    async run() {
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

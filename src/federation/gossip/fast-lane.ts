// The fast lane: the keys queued in the fast-lane sets (decide.lua: a loud first admission in a window/epoch, a
// false denial; apply_gossip.lua: a grant) go to the peers now, not at the next sync round; then each is forgotten
// in that peer's pending set where the version sent is still the newest. A key this region shows demand for goes to
// every peer; a grant only to the peers it went to (fastTargets): the others hear of it with the next sync round.
// A send pulls that peer's sync round forward (sync-round.ts flush): the job carries what is pending for the peer
// too, and the timed round after it leaves the peer out, so a peer gets about one job per round, not two.
// It looks only at the shards dirty for it (dirty-shards.ts: their bell rang), and runs when the publisher is
// woken, at most once per FAST_LANE_MS.
import type { Logger } from 'pino';
import type { Config } from '../../config/schema.ts';
import { runTakeFast, takeFastCall, type FastKey } from '../../store/gossip-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import { layoutOf, shardOfKey } from '../../keys.ts';
import type { FederationMetrics } from '../metrics.ts';
import { fastLaneTargets, type FastLaneTargets, type Topology } from '../../protocol/index.ts';
import { decodeState, flattenSlot, type DecodedState } from './cells.ts';
import type { DirtyShards } from './dirty-shards.ts';
import type { InFlight } from './in-flight.ts';
import type { GossipEntry } from './message.ts';
import type { PeerLink } from './peer-link.ts';
import type { SyncRound } from './sync-round.ts';

/** The least time between two fast-lane runs (and so between two fast sends of one key). */
export const FAST_LANE_MS = 20;

/** Keys taken from one shard's fast-lane set per fast round. */
const FAST_KEYS_PER_SHARD = 64;

export interface FastLaneDeps {
  config: Config;
  topology: Topology;
  redis: ScriptedRedis;
  links: readonly PeerLink[];
  metrics: FederationMetrics;
  logger: Logger;
  /** The shards to look at. */
  dirty: DirtyShards;
  /** The keys the lanes have in flight (shared with the sync round). */
  inFlight: InFlight;
  /** The sync round's flush: a peer's round now, with the fast keys first (sync-round.ts). */
  sync: Pick<SyncRound, 'flush'>;
}

export interface FastLane {
  /** One fast-lane round: returns the keys sent; never throws (what is not sent goes with the next sync round). */
  round(): Promise<number>;
  /**
   * Keys taken off the fast-lane sets already, with their state (a quiet gossip job's grants: apply.ts): the next
   * round sends them with what it takes itself.
   */
  handOver(keys: readonly FastKey[]): void;
}

/** The fast lane: its rounds, and the keys handed to it between them. */
export function createFastLane({ config, topology, redis, links, metrics, logger, dirty, inFlight, sync }: FastLaneDeps): FastLane {
  const region = config.region;
  const keys = layoutOf(config);
  const n = topology.regions.length;
  const handed: FastKey[] = [];
  const round = async (): Promise<number> => {
    try {
      // One call per dirty shard (their keys live in different cluster slots), issued together: take_fast.lua pops
      // the shard's keys and reads their state in one round trip.
      const shards = dirty.take('fast');
      const given = handed.splice(0);
      if (shards.length === 0 && given.length === 0) return 0;
      let perShard: FastKey[][];
      try {
        perShard = await Promise.all(shards.map((shard) => runTakeFast(redis, takeFastCall(keys, shard, FAST_KEYS_PER_SHARD))));
      } catch (error) {
        // The handed keys are pending for their grantees still: they go with the next sync round.
        dirty.keep('fast', shards);
        throw error;
      }
      // A full take may have left keys behind: that shard stays dirty.
      dirty.keep(
        'fast',
        shards.filter((_, i) => perShard[i]!.length >= FAST_KEYS_PER_SHARD),
      );
      const entries: GossipEntry[] = [];
      const versions: [string, number][] = [];
      const targets: FastLaneTargets[] = [];
      // Each key once, as last read (a key handed over may be queued again since, and taken here).
      const taken = new Map<string, string[]>();
      for (const { key, fields } of [...given, ...perShard.flat()]) taken.set(key, fields);
      // A key that expired, or is a string now (it came back silent: lua/includes/silent_string.lua), has nothing to send.
      for (const [key, fields] of taken) {
        const state = decodeState(fields, n);
        if (state.slots.length === 0) continue;
        entries.push({ k: key, t: state.changedAt, s: state.slots.map(flattenSlot) });
        versions.push([key, state.version]);
        targets.push(fastTargets(state, topology.selfIndex, n));
      }
      if (entries.length === 0) return 0;
      /**
       * Sends the entries `mine` to one peer with everything pending for it (sync-round.ts flush), and forgets them
       * in its pending sets.
       */
      const sendAndForget = async (link: PeerLink, mine: number[]): Promise<void> => {
        const chunk = mine.map((i) => entries[i]!);
        const acks = new Map<number, { key: string; version: string }[]>();
        for (const i of mine) {
          const [key, version] = versions[i]!;
          const shard = shardOfKey(key);
          const ack = acks.get(shard) ?? [];
          ack.push({ key, version: String(version) });
          acks.set(shard, ack);
        }
        // Sent: each key is forgotten in this peer's pending set if that version is still the newest (the acks).
        if (await sync.flush(link, { entries: chunk, acks })) metrics.fastLane.inc({ region, peer: link.name }, chunk.length);
      };
      await Promise.all(
        links.map(async (link) => {
          // The key's targets, less what the sync round has in flight to this peer already (in-flight.ts).
          const mine = entries.flatMap((_, i) =>
            (targets[i] === 'all' || targets[i]!.includes(link.index)) && inFlight.claim(link.index, ...versions[i]!) ? [i] : [],
          );
          if (mine.length === 0) return;
          try {
            await sendAndForget(link, mine);
          } finally {
            for (const i of mine) inFlight.release(link.index, ...versions[i]!);
          }
        }),
      );
      return entries.length;
    } catch (error) {
      // Local Redis trouble: the keys are still pending and go out with the next sync round; look at everything.
      dirty.markAll();
      logger.debug({ event: 'federation.fast_lane_failed', error: (error as Error).message }, 'fast lane round failed');
      return 0;
    }
  };
  return {
    round,
    handOver(given) {
      handed.push(...given);
    },
  };
}

/** fastLaneTargets of a decoded state (its newest slot; x flattened as x[o·n + d]). */
function fastTargets(state: DecodedState, self: number, n: number): FastLaneTargets {
  let newest = state.slots[0];
  for (const slot of state.slots) if (newest === undefined || slot.id > newest.id) newest = slot;
  if (newest === undefined) return 'all';
  const slot = newest;
  return fastLaneTargets(slot.c[self]!, slot.t[self]!, (d) => slot.x[self * n + d]!, self, n);
}

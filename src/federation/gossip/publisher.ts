// The sending half of gossip, composed: each round first sweeps the watch sets (watch-sweep.ts), then runs the
// sync round to every peer (sync-round.ts); the fast lane (fast-lane.ts) runs on its own, when woken, and pulls a
// peer's sync round forward when it sends to it. Both lanes send through one sender (sender.ts), so their messages
// share one sequence and one last-sent clock. Every
// lane looks only at the shards dirty for it (dirty-shards.ts); without `dirty`, at every shard (polling).
import type { Logger } from 'pino';
import type { Config } from '../../config/schema.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import type { FastKey } from '../../store/gossip-calls.ts';
import type { FederationMetrics } from '../metrics.ts';
import type { PeerBook } from '../peers.ts';
import type { Topology } from '../../protocol/index.ts';
import { pollingShards, type DirtyShards } from './dirty-shards.ts';
import { createFastLane } from './fast-lane.ts';
import { createInFlight } from './in-flight.ts';
import type { PeerLink } from './peer-link.ts';
import { createSender } from './sender.ts';
import { createSyncRound } from './sync-round.ts';
import { createWatchSweep } from './watch-sweep.ts';

export interface PublisherDeps {
  config: Config;
  /** The rules in force now (a policy reload changes them); `config` otherwise. */
  currentConfig?: () => Config;
  /**
   * The rules decided with now: the rules in force at the tighter terms of peers that run a rule with other
   * parameters (rule-identity.ts `tightenRules`); what the watch sweep moves rights under. `currentConfig` otherwise.
   */
  decidingConfig?: () => Config;
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
  /** The shards each lane looks at (their bells rang); every shard, always, when omitted. */
  dirty?: DirtyShards;
}

export interface Publisher {
  /**
   * One publishing round: the watch sweep, then the sync round to every peer (a timed round, force false, leaves out
   * a peer the fast lane flushed less than an interval ago); never throws.
   */
  round(force?: boolean): Promise<void>;
  /** One fast-lane round to every peer (run when woken, at most every FAST_LANE_MS); returns the keys sent; never throws. */
  fastRound(): Promise<number>;
  /** Keys taken off the fast-lane sets with their state (a quiet gossip job's grants): sent by the next fast round. */
  handOver(keys: readonly FastKey[]): void;
  /** Ask every peer to send everything again (after this region lost data); retried each round until sent. */
  requestResync(): void;
  /** Keys pending per peer, counted in every pending set (also updates the backlog gauge). */
  sampleBacklog(): Promise<Map<number, number[]>>;
}

export function createPublisher(deps: PublisherDeps): Publisher {
  const { config, topology, redis, links, metrics, peers, logger } = deps;
  const dirty = deps.dirty ?? pollingShards();
  const sender = createSender({
    config,
    topology,
    metrics,
    peers,
    addTimeoutMs: deps.addTimeoutMs,
    currentConfig: () => deps.currentConfig?.() ?? config,
  });
  const sweep = createWatchSweep({
    region: config.region,
    currentConfig: () => deps.decidingConfig?.() ?? deps.currentConfig?.() ?? config,
    topology,
    redis,
    metrics,
    logger,
    dirty,
  });
  // Both lanes send through one sender and claim what they send (in-flight.ts), so a key goes to a peer once.
  const inFlight = createInFlight();
  const sync = createSyncRound({ config, topology, redis, links, peers, logger, sender, heartbeatMs: deps.heartbeatMs, dirty, inFlight });
  const fast = createFastLane({ config, topology, redis, links, metrics, logger, dirty, inFlight, sync });
  return {
    sampleBacklog: sync.sampleBacklog,
    fastRound: fast.round,
    handOver: fast.handOver,
    requestResync: sync.requestResync,
    async round(force = false) {
      await sweep();
      await sync.run(force);
    },
  };
}

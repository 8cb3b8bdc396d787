// Recovery after data loss (issue 3 item 8). A region whose Redis lost its data must not hand out what it had
// already admitted a second time. At start-up, a missing start-up marker in qf:meta means either a brand-new
// region or a Redis that lost its data; the peers tell the two apart (each records, in its own qf:meta, when it
// last heard from us). If any peer has heard of us, or a peer cannot be asked, the data is taken as lost: every
// shard marker gets `fence = now` (Redis TIME), so decide.lua admits nothing in the windows that began before
// it and token buckets start empty at the fence, and each peer is asked to resync (resync.ts) so this region's
// views, its own row as the peers saw it included, are rebuilt within a few sync intervals.
// While running, the same loss is detected by the start-up marker disappearing (FLUSHALL, a restart without
// persistence under a running service); decide.lua and apply_gossip.lua fence a shard the moment they find its
// marker missing, and this module then fences the rest and asks for the resync.
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.ts';
import { orAfter } from '../deadline.ts';
import { KEY_SHARDS, META_KEY, shardMarkerKey } from '../keys.ts';
import { heardField } from './gossip/apply.ts';
import { peerTargets, probeConnection, type GossipTarget } from './gossip/connections.ts';
import type { Topology } from './topology.ts';

/** Meta field written once the region's state is known good (its presence means "no loss since"). */
export const STARTED_FIELD = 'started';

export type PeerAnswer = 'heard' | 'never' | 'unreachable';

export interface RecoveryResult {
  /** True when this Redis was found to have lost data and the shards were fenced. */
  fenced: boolean;
  /** The fence written (ms, Redis TIME), 0 when none. */
  fence: number;
  answers: Record<string, PeerAnswer>;
}

async function redisNow(redis: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * Has the peer's Redis heard of `region`? Any doubt (timeout, refused, error) answers 'unreachable'. A cluster
 * peer is asked through a cluster connection: qf:meta lives in one slot, and a single node would answer MOVED.
 */
export async function askPeer(peer: GossipTarget | string, region: string, timeoutMs: number): Promise<PeerAnswer> {
  const connection = probeConnection(typeof peer === 'string' ? { redisUrl: peer } : peer, timeoutMs);
  connection.on('error', () => undefined);
  // A cluster's connect walks the seeds one by one: bound the whole question, not each step.
  const question = (async (): Promise<PeerAnswer> => {
    await connection.connect();
    return (await connection.hget(META_KEY, heardField(region))) === null ? 'never' : 'heard';
  })().catch((): PeerAnswer => 'unreachable');
  try {
    return await orAfter(question, 2 * timeoutMs, 'unreachable' as const);
  } finally {
    connection.disconnect();
  }
}

/** True while the start-up marker is present (no data loss since this region last started). */
export async function stateIntact(redis: Redis | Cluster): Promise<boolean> {
  return (await redis.hexists(META_KEY, STARTED_FIELD)) === 1;
}

/**
 * Fences every shard at Redis TIME. `overwrite` replaces existing markers (start-up: a marker that survived a
 * partial loss proves nothing); otherwise markers that decide/apply recreated since the loss are kept (their
 * fences are already later than the loss).
 */
export async function fenceAllShards(redis: Redis | Cluster, overwrite: boolean): Promise<number> {
  const now = await redisNow(redis);
  await Promise.all(
    Array.from({ length: KEY_SHARDS }, (_, shard) =>
      overwrite ? redis.hset(shardMarkerKey(shard), 'fence', now) : redis.hsetnx(shardMarkerKey(shard), 'fence', now),
    ),
  );
  return now;
}

/**
 * Marks every shard as never having lost data (fence 0): what a brand-new region does, and what the chaos lab and
 * the benchmarks do to a Redis they just emptied (a fresh run is not a data loss).
 */
export async function markShardsIntact(redis: Redis | Cluster): Promise<void> {
  await Promise.all(Array.from({ length: KEY_SHARDS }, (_, shard) => redis.hset(shardMarkerKey(shard), 'fence', 0)));
}

async function markStarted(redis: Redis | Cluster, config: Config, topology: Topology, fence: number): Promise<void> {
  const now = await redisNow(redis);
  await redis.hset(META_KEY, 'region', config.region, 'fingerprint', topology.fingerprint, 'fence', fence, STARTED_FIELD, now);
}

export interface RecoveryDeps {
  config: Config;
  topology: Topology;
  redis: Redis | Cluster;
  logger: Logger;
  /** Per-peer question timeout. */
  timeoutMs?: number;
}

/** Run before the region gossips (and ideally before it serves): decides whether this Redis lost data. */
export async function recoverOnStart(deps: RecoveryDeps): Promise<RecoveryResult> {
  const { config, topology, redis, logger } = deps;
  if (await stateIntact(redis)) return { fenced: false, fence: 0, answers: {} };
  const timeoutMs = deps.timeoutMs ?? 2_000;
  const entries = await Promise.all(
    peerTargets(config).map(async (peer) => [peer.name, await askPeer(peer, config.region, timeoutMs)] as const),
  );
  const answers = Object.fromEntries(entries) as Record<string, PeerAnswer>;
  const lost = entries.some(([, answer]) => answer !== 'never');
  let fence = 0;
  if (lost) {
    fence = await fenceAllShards(redis, true);
    logger.warn(
      { event: 'federation.data_loss', answers, fence },
      'this Redis has no start-up marker but peers know this region (or could not be asked): fencing the current windows and asking peers to resync',
    );
  } else {
    // A new region: fence 0 everywhere. A marker a decision created before this check (the service may serve
    // before the federation starts) carries a spurious fence: nothing was lost, so it is reset too.
    await markShardsIntact(redis);
    logger.info({ event: 'federation.fresh_start', answers }, 'no peer has heard of this region: starting fresh');
  }
  await markStarted(redis, config, topology, fence);
  return { fenced: lost, fence, answers };
}

/** The running region found its start-up marker gone: its Redis lost data under it. */
export async function recoverWhileRunning(deps: RecoveryDeps): Promise<number> {
  const fence = await fenceAllShards(deps.redis, false);
  await markStarted(deps.redis, deps.config, deps.topology, fence);
  deps.logger.warn({ event: 'federation.data_loss', fence, whileRunning: true }, 'the start-up marker vanished while running: Redis lost data; fencing and asking peers to resync');
  return fence;
}

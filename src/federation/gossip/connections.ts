// Connections for gossip, from the redis:// or rediss:// URLs in the config (AUTH user/password and TLS come
// from the URL, like the region's own client). A region or a peer whose Redis is a Redis Cluster is reached
// through an ioredis Cluster built from its seed URLs; BullMQ takes that instance as its connection.
import type { RedisOptions as BullRedisOptions } from 'bullmq';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Config, Peer, RedisTls } from '../../config/schema.ts';
import { clusterSeeds, connectionOptionsFromUrl } from '../../store/client.ts';

/** Where a gossip connection goes: one Redis, or a cluster given by seed URLs (which then win over `redisUrl`). */
export interface GossipTarget {
  redisUrl: string;
  clusterNodes?: readonly string[] | undefined;
  tls?: RedisTls | undefined;
}

export type GossipConnection = Redis | Cluster;

/** The configured peers as gossip targets: a peer without its own TLS settings uses the region's (same CA in one deployment). */
export function peerTargets(config: Pick<Config, 'redis' | 'federation'>): (Peer & GossipTarget)[] {
  return config.federation.peers.map((peer) => ({ ...peer, tls: peer.tls ?? config.redis.tls }));
}

const reconnect = (times: number) => Math.min(100 * times, 2_000);

function isClusterTarget(target: GossipTarget): target is GossipTarget & { clusterNodes: readonly string[] } {
  return target.clusterNodes !== undefined && target.clusterNodes.length > 0;
}

/** A Cluster over the seed URLs (seeds parsed by the region client's `clusterSeeds`). */
function clusterConnection(
  seeds: readonly string[],
  tls: RedisTls | undefined,
  nodeOptions: RedisOptions,
  clusterOptions: ClusterOptions = {},
): Cluster {
  const { nodes, shared } = clusterSeeds(seeds, tls);
  return new Cluster(nodes, { clusterRetryStrategy: reconnect, ...clusterOptions, redisOptions: { ...shared, ...nodeOptions } });
}

/**
 * A producer connection to a peer's Redis: fails fast (no offline queue, one retry, bounded connect and
 * commands), so a partition turns into a failed add the publisher counts, never into commands piling up in
 * memory. It reconnects by itself quickly after a heal.
 */
function producerOptions(url: string, timeoutMs: number, tls?: RedisTls): RedisOptions {
  return {
    ...connectionOptionsFromUrl(url, tls),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    retryStrategy: reconnect,
  };
}

/** The producer connection for a peer, a Cluster when the peer's Redis is one (same fail-fast bounds). */
export function producerConnection(target: GossipTarget, timeoutMs: number): GossipConnection {
  if (!isClusterTarget(target)) return new Redis(producerOptions(target.redisUrl, timeoutMs, target.tls));
  return clusterConnection(
    target.clusterNodes,
    target.tls,
    { maxRetriesPerRequest: 1, connectTimeout: timeoutMs, commandTimeout: timeoutMs },
    // The add is bounded by the publisher's timeout anyway; the slots refresh must not outlast it.
    { enableOfflineQueue: false, slotsRefreshTimeout: Math.min(timeoutMs, 2_000) },
  );
}

/** The worker's connection to this region's Redis: blocking commands need maxRetriesPerRequest null. */
export function workerOptions(url: string, tls?: RedisTls): BullRedisOptions {
  return { ...connectionOptionsFromUrl(url, tls), maxRetriesPerRequest: null, retryStrategy: reconnect } as BullRedisOptions;
}

/**
 * The worker's connection when this region's Redis is a cluster. BullMQ neither creates nor closes a Cluster:
 * the caller owns it. Offline queue on (a consumer waits for its Redis rather than failing), no retry limit.
 */
export function workerClusterConnection(seeds: readonly string[], tls: RedisTls | undefined): Cluster {
  return clusterConnection(seeds, tls, { maxRetriesPerRequest: null });
}

/** A short-lived connection for one question to a peer (recovery): no retries, no reconnects. */
export function probeConnection(target: GossipTarget, timeoutMs: number): GossipConnection {
  const bounds = { connectTimeout: timeoutMs, commandTimeout: timeoutMs, maxRetriesPerRequest: 0 };
  if (!isClusterTarget(target)) {
    return new Redis({
      ...connectionOptionsFromUrl(target.redisUrl, target.tls),
      ...bounds,
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
  }
  return clusterConnection(target.clusterNodes, target.tls, bounds, {
    lazyConnect: true,
    enableOfflineQueue: false,
    clusterRetryStrategy: () => null,
    slotsRefreshTimeout: timeoutMs,
  });
}

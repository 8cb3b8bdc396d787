// The region's Redis client, tuned to fail fast on the request path: no offline queue, a command timeout,
// and ioredis's own reconnect loop so the client recovers by itself.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';
import type { Config, RedisTls } from '../config/schema.ts';
import { SCRIPTS } from './commands.ts';

/** The region's Redis: one server, or a cluster (redis.clusterNodes). */
export type RegionRedis = Redis | Cluster;

/** Attempts of one command on a cluster (MOVED/ASK during a reshard, connection closed or CLUSTERDOWN in a failover). */
const CLUSTER_MAX_REDIRECTIONS = 6;
const CLUSTER_RETRY_DELAY_MS = 100;

function urlNode(url: string): ClusterNode {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 6379) };
}

function tlsOptions(tls: RedisTls | undefined): ConnectionOptions {
  if (!tls) return {};
  return {
    ...(tls.caFile ? { ca: readFileSync(tls.caFile) } : {}),
    ...(tls.certFile ? { cert: readFileSync(tls.certFile) } : {}),
    ...(tls.keyFile ? { key: readFileSync(tls.keyFile) } : {}),
    ...(tls.servername ? { servername: tls.servername } : {}),
    rejectUnauthorized: tls.rejectUnauthorized,
  };
}

/**
 * Connection options from a redis:// or rediss:// URL: ACL user and password from the URL, TLS when the
 * scheme is rediss://. Used for the region's own Redis and for peers' Redis servers alike.
 */
export function connectionOptionsFromUrl(url: string, tls?: RedisTls): RedisOptions {
  const parsed = new URL(url);
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.pathname.length > 1 ? { db: Number(parsed.pathname.slice(1)) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: tlsOptions(tls) } : {}),
  };
}

/**
 * A cluster's seed nodes and the options every node shares: credentials and TLS from the first seed (one cluster
 * shares them); a cluster has only database 0, so a path in the URL is ignored.
 */
export function clusterSeeds(seeds: readonly string[], tls?: RedisTls): { nodes: ClusterNode[]; shared: RedisOptions } {
  const { host: _host, port: _port, db: _db, ...shared } = connectionOptionsFromUrl(seeds[0]!, tls);
  return { nodes: seeds.map(urlNode), shared };
}

/** Commands never auto-pipelined: the engine's decide FCALLs, which its micro-batcher already batches. */
const DIRECT_COMMANDS = ['fcall'];

/**
 * The region's client from the config's redis section: one server from redis.url, or a cluster from
 * redis.clusterNodes, tuned to fail fast on the request path: no offline queue, a command timeout, ioredis's own
 * reconnect loop. `overrides` replace options of the single-server client and of every cluster node.
 *
 * @example
 * ```ts
 * const config = parseConfig({ region: 'us-east', redis: { url: 'redis://127.0.0.1:6379' }, rules: [] });
 * const redis = createRegionRedis(config);
 * const engine = createRedisEngine({ config, redis });
 * ```
 */
export function createRegionRedis(config: Pick<Config, 'redis'>, overrides: Partial<RedisOptions> = {}): RegionRedis {
  const { redis } = config;
  const common: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: redis.commandTimeoutMs,
    connectTimeout: redis.connectTimeoutMs,
    enableAutoPipelining: redis.autoPipelining,
    // Decide calls are batched by the engine itself (decide-batcher.ts): one FCALL per batch is written at once
    // instead of being queued for the next tick and wrapped in a pipeline (which cost CPU and bought nothing).
    autoPipeliningIgnoredCommands: DIRECT_COMMANDS,
    ...overrides,
  };
  if (redis.clusterNodes) {
    const { nodes, shared } = clusterSeeds(redis.clusterNodes, redis.tls);
    return new Cluster(nodes, {
      enableOfflineQueue: false,
      enableAutoPipelining: redis.autoPipelining,
      // ioredis buckets an auto-pipeline by the slot of a script's first argument, which for our scripts is the
      // key count, not a key: decisions for keys on different primaries would share a pipeline and be refused
      // ("same slots allocation group"). Script calls are sent one by one, each routed by its own keys.
      autoPipeliningIgnoredCommands: [...Object.keys(SCRIPTS), ...DIRECT_COMMANDS],
      // Fail fast while a primary is down: a few retries (each one refreshes the slot map, so the promoted
      // replica is found as soon as the cluster has elected it), then the error reaches the fail mode.
      maxRedirections: CLUSTER_MAX_REDIRECTIONS,
      retryDelayOnFailover: CLUSTER_RETRY_DELAY_MS,
      retryDelayOnClusterDown: CLUSTER_RETRY_DELAY_MS,
      retryDelayOnTryAgain: CLUSTER_RETRY_DELAY_MS,
      slotsRefreshTimeout: redis.connectTimeoutMs,
      redisOptions: { ...common, ...shared },
    });
  }
  return new Redis({ ...connectionOptionsFromUrl(redis.url, redis.tls), ...common });
}

/** Resolves once the client is ready (commands fail fast before that, by design). */
export async function waitReady(redis: RegionRedis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  const timer = AbortSignal.timeout(timeoutMs);
  await once(redis, 'ready', { signal: timer }).catch((error: unknown) => {
    throw new Error(`Redis not ready after ${timeoutMs} ms`, { cause: error });
  });
}

/**
 * Whether a command failed on a key of another type (WRONGTYPE): a single region's token bucket is a string where
 * the other state keys are hashes (lua/includes/gcra.lua).
 *
 * @example
 * ```ts
 * const hash = await redis.hgetall(key).catch((error: unknown) => (isWrongTypeError(error) ? undefined : Promise.reject(error)));
 * ```
 */
export function isWrongTypeError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('WRONGTYPE');
}

// The region's Redis client, tuned to fail fast on the request path: no offline queue, a command timeout,
// and ioredis's own reconnect loop so the client recovers by itself.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';
import type { Config, RedisTls } from '../config/schema.ts';

export type RegionRedis = Redis | Cluster;

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

export function createRegionRedis(config: Pick<Config, 'redis'>, overrides: Partial<RedisOptions> = {}): RegionRedis {
  const { redis } = config;
  const common: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: redis.commandTimeoutMs,
    connectTimeout: redis.connectTimeoutMs,
    enableAutoPipelining: redis.autoPipelining,
    ...overrides,
  };
  if (redis.clusterNodes) {
    return new Cluster(redis.clusterNodes.map(urlNode), {
      enableOfflineQueue: false,
      enableAutoPipelining: redis.autoPipelining,
      redisOptions: { ...common, ...connectionOptionsFromUrl(redis.clusterNodes[0]!, redis.tls), host: undefined, port: undefined } as never,
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

// The region's Redis client, tuned to fail fast on the request path: no offline queue, a command timeout,
// and ioredis's own reconnect loop so the client recovers by itself.
import { once } from 'node:events';
import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';
import type { Config } from '../config/schema.ts';

export type RegionRedis = Redis | Cluster;

function urlNode(url: string): ClusterNode {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 6379) };
}

function authAndTls(url: string): Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  const parsed = new URL(url);
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
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
      redisOptions: { ...common, ...authAndTls(redis.clusterNodes[0]!) } as never,
    });
  }
  return new Redis(redis.url, common);
}

/** Resolves once the client is ready (commands fail fast before that, by design). */
export async function waitReady(redis: RegionRedis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  const timer = AbortSignal.timeout(timeoutMs);
  await once(redis, 'ready', { signal: timer }).catch((error: unknown) => {
    throw new Error(`Redis not ready after ${timeoutMs} ms`, { cause: error });
  });
}

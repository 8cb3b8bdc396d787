// Connections for gossip, from the redis:// or rediss:// URLs in the config (AUTH user/password and TLS come
// from the URL, like the region's own client).
import type { RedisOptions as BullRedisOptions } from 'bullmq';
import type { RedisOptions } from 'ioredis';

export function redisOptionsOf(url: string): RedisOptions {
  const parsed = new URL(url);
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : undefined;
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
    ...(db !== undefined && Number.isInteger(db) ? { db } : {}),
  };
}

/**
 * A producer connection to a peer's Redis: fails fast (no offline queue, one retry, bounded connect and
 * commands), so a partition turns into a failed add the publisher counts, never into commands piling up in
 * memory. It reconnects by itself quickly after a heal.
 */
export function producerOptions(url: string, timeoutMs: number): RedisOptions {
  return {
    ...redisOptionsOf(url),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    retryStrategy: (times: number) => Math.min(100 * times, 2_000),
  };
}

/** The worker's connection to this region's Redis: blocking commands need maxRetriesPerRequest null. */
export function workerOptions(url: string): BullRedisOptions {
  return { ...redisOptionsOf(url), maxRetriesPerRequest: null, retryStrategy: (times: number) => Math.min(100 * times, 2_000) } as BullRedisOptions;
}

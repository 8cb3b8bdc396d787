// The library: a working limiter in a few lines, on the same Redis engine the regional service decides with.
import type { Redis, Cluster } from 'ioredis';
import type { AlgorithmSpec } from './algorithms.ts';
import { parseConfig } from './config/load.ts';
import type { FailMode } from './config/schema.ts';
import { createRedisEngine } from './engine/redis-engine.ts';
import type { Decision, Lease } from './engine/types.ts';

/**
 * Options of {@link createLimiter}: your Redis client, one algorithm, and what happens when Redis is down.
 *
 * @example
 * ```ts
 * const options: LimiterOptions = {
 *   redis: new Redis(process.env.REDIS_URL!),
 *   limit: slidingWindow(100, '1m'),
 *   name: 'search', // appears in Redis keys and in the decision's outcomes
 *   failMode: 'open', // admit (and count) while Redis is unreachable; 'closed' (the default) rejects
 * };
 * ```
 */
export interface LimiterOptions {
  /** Your Redis: a single node or a Cluster (ioredis). */
  redis: Redis | Cluster;
  /** The algorithm and its limit: `tokenBucket(1000, '1m')`, `fixedWindow(...)`, `concurrency(...)`... */
  limit: AlgorithmSpec;
  /** Rule name (appears in keys and headers). */
  name?: string;
  /** When Redis cannot decide: `'closed'` (default) rejects, `'open'` admits and counts the admission. */
  failMode?: FailMode;
  /**
   * Local leases for hot identifiers (docs/leases.md): an identifier limited twice within `ttlMs` (default 100)
   * takes up to `size` units in the Redis call and is then decided in memory until they are spent or the lease
   * ends; `close()` gives back what is unspent. Token bucket, fixed and sliding window.
   */
  lease?: { size: number; ttlMs?: number };
}

/**
 * What {@link Limiter.limit} answers: whether this call is allowed, what is left, and when to retry.
 *
 * @example
 * ```ts
 * const { allowed, remaining, retryAfterMs } = await limiter.limit('api-key-42');
 * if (!allowed) return new Response('Too Many Requests', { status: 429, headers: { 'Retry-After': String(Math.ceil(retryAfterMs / 1000)) } });
 * ```
 */
export interface LimitResult {
  allowed: boolean;
  /** The configured limit. */
  limit: number;
  /** What is left for this identifier after this call. */
  remaining: number;
  /** Epoch milliseconds at which the limit is fully available again (window end, bucket full). */
  resetAtMs: number;
  /** Milliseconds until a retry can succeed (0 when allowed). */
  retryAfterMs: number;
  /** Concurrency leases to hand back with `release` when the work is done. */
  leases: Lease[];
  /** The engine's whole decision (its outcome, how it was reached: `source`). */
  decision: Decision;
}

/**
 * A limiter on one algorithm, keyed by the identifier you pass: an API key, a user id, an IP.
 *
 * @example
 * ```ts
 * const limiter = createLimiter({ redis: new Redis(), limit: concurrency(10) });
 * const { allowed, leases } = await limiter.limit('tenant-7');
 * if (allowed) {
 *   try {
 *     await work();
 *   } finally {
 *     await limiter.release(leases); // frees the concurrency slot
 *   }
 * }
 * ```
 */
export interface Limiter {
  /** Decide one call for `identifier`, spending `cost` (default 1). */
  limit(identifier: string, options?: { cost?: number }): Promise<LimitResult>;
  /**
   * What `limit` would answer for `identifier` and `cost` now, spending nothing (no count, token or lease).
   *
   * @example
   * ```ts
   * const { allowed, remaining } = await limiter.peek('api-key-42'); // the same answer as limit(), nothing spent
   * ```
   */
  peek(identifier: string, options?: { cost?: number }): Promise<LimitResult>;
  /** Hand back concurrency leases (`result.leases`) when the work is done; other algorithms take none. */
  release(leases: readonly Lease[]): Promise<void>;
  /**
   * Gives back the unspent units of local leases (`options.lease`) and stops their timer; call it before closing
   * your Redis client. Without leases it does nothing.
   *
   * @example
   * ```ts
   * process.once('SIGTERM', () => void limiter.close().then(() => redis.quit()));
   * ```
   */
  close(): Promise<void>;
}

/**
 * A rate limiter on your own Redis: one atomic Lua call per `limit`, exact in that Redis. No HTTP server, gRPC or
 * BullMQ is loaded; the federation between regions is the regional service's (`quotafed/service`).
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createLimiter, tokenBucket } from 'quotafed';
 *
 * const limiter = createLimiter({ redis: new Redis(), limit: tokenBucket(1000, '1m') });
 * const { allowed, remaining, retryAfterMs } = await limiter.limit('api-key-42');
 * const heavy = await limiter.limit('api-key-42', { cost: 10 }); // one call that spends 10 tokens
 * ```
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const config = parseConfig({
    region: 'local',
    rules: [
      {
        name: options.name ?? 'limit',
        by: ['apiKey'],
        failMode: options.failMode ?? 'closed',
        ...options.limit,
        ...(options.lease ? { lease: options.lease } : {}),
      },
    ],
  });
  const engine = createRedisEngine({ config, redis: options.redis });
  const decide = async (identifier: string, cost: number, peek: boolean): Promise<LimitResult> => {
    const decision = await engine.decide({ apiKey: identifier, ip: '', method: 'GET', path: '/', cost, peek });
    const binding = decision.binding!;
    return {
      allowed: decision.allowed,
      limit: binding.limit,
      remaining: binding.remaining,
      resetAtMs: binding.resetAtMs,
      retryAfterMs: binding.retryAfterMs,
      leases: decision.leases,
      decision,
    };
  };
  return {
    limit: (identifier, limitOptions = {}) => decide(identifier, limitOptions.cost ?? 1, false),
    peek: (identifier, peekOptions = {}) => decide(identifier, peekOptions.cost ?? 1, true),
    release: (leases) => engine.release(leases),
    close: () => engine.close(),
  };
}

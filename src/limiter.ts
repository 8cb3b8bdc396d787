// The library entry point: a working limiter in a few lines.
//
//   const limiter = createLimiter({ redis: new Redis(), limit: tokenBucket(1000, '1m') });
//   const { allowed, remaining, retryAfterMs } = await limiter.limit('customer-42');
import type { Redis, Cluster } from 'ioredis';
import type { AlgorithmSpec } from './algorithms.ts';
import { parseConfig } from './config/load.ts';
import type { FailMode } from './config/schema.ts';
import { createRedisEngine } from './engine/redis-engine.ts';
import type { Decision, Lease } from './engine/types.ts';

export interface LimiterOptions {
  redis: Redis | Cluster;
  limit: AlgorithmSpec;
  /** Rule name (appears in keys and headers). */
  name?: string;
  failMode?: FailMode;
}

export interface LimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetAtMs: number;
  retryAfterMs: number;
  /** Concurrency leases to hand back with `release` when the work is done. */
  leases: Lease[];
  decision: Decision;
}

export interface Limiter {
  limit(identifier: string, options?: { cost?: number }): Promise<LimitResult>;
  release(leases: readonly Lease[]): Promise<void>;
}

export function createLimiter(options: LimiterOptions): Limiter {
  const config = parseConfig({
    region: 'local',
    rules: [{ name: options.name ?? 'limit', by: ['apiKey'], failMode: options.failMode ?? 'closed', ...options.limit }],
  });
  const engine = createRedisEngine({ config, redis: options.redis });
  return {
    async limit(identifier, limitOptions = {}) {
      const decision = await engine.decide({ apiKey: identifier, ip: '', method: 'GET', path: '/', cost: limitOptions.cost ?? 1 });
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
    },
    release: (leases) => engine.release(leases),
  };
}

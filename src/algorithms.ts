// Algorithms are values: `tokenBucket(1000, '1m')` is a rule fragment, not a subclass. Pass one as `limit` to
// createLimiter, or spread it into a rule of a region's config.
import type { Rule } from './config/schema.ts';

/**
 * A duration: milliseconds as a number, or a number with a unit (`ms`, `s`, `m`, `h`, `d`).
 *
 * @example
 * ```ts
 * const periods: Period[] = [60_000, '500ms', '30s', '1m', '1h', '1d'];
 * ```
 */
export type Period = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`;

/**
 * One algorithm with its limit, as the algorithm functions return it; the fields of a config rule it sets.
 *
 * @example
 * ```ts
 * const spec: AlgorithmSpec = tokenBucket(100, '1s', { burst: 200 });
 * // { algorithm: 'tokenBucket', limit: 100, period: '1s', burst: 200 }
 * const limiter = createLimiter({ redis, limit: spec });
 * ```
 */
export type AlgorithmSpec = Pick<Rule, 'algorithm' | 'limit'> & { period?: Period; burst?: number; leaseTtl?: Period };

/**
 * Average `limit` per `period`, bursts up to `burst` (default: limit). Federates across regions.
 *
 * @example
 * ```ts
 * createLimiter({ redis, limit: tokenBucket(1000, '1m') }); // 1000 per minute, refilled continuously
 * createLimiter({ redis, limit: tokenBucket(10, '1s', { burst: 50 }) }); // 10/s on average, 50 at once
 * ```
 */
export const tokenBucket = (limit: number, period: Period, options: { burst?: number } = {}): AlgorithmSpec => ({
  algorithm: 'tokenBucket',
  limit,
  period,
  ...(options.burst !== undefined ? { burst: options.burst } : {}),
});

/**
 * `limit` per calendar window of `period`; simplest, allows a burst at the boundary. Federates across regions.
 *
 * @example
 * ```ts
 * createLimiter({ redis, limit: fixedWindow(100, '1m') }); // 100 per clock minute
 * ```
 */
export const fixedWindow = (limit: number, period: Period): AlgorithmSpec => ({ algorithm: 'fixedWindow', limit, period });

/**
 * Sliding-window counter: constant memory, smooths the boundary burst (approximate). Federates across regions.
 *
 * @example
 * ```ts
 * createLimiter({ redis, limit: slidingWindow(100, '1m') }); // about 100 in any minute
 * ```
 */
export const slidingWindow = (limit: number, period: Period): AlgorithmSpec => ({ algorithm: 'slidingWindow', limit, period });

/**
 * Sliding-window log: exact over any `period`, memory grows with requests. Regional only.
 *
 * @example
 * ```ts
 * createLimiter({ redis, limit: slidingLog(5, '10s') }); // never more than 5 in any 10 s
 * ```
 */
export const slidingLog = (limit: number, period: Period): AlgorithmSpec => ({ algorithm: 'slidingLog', limit, period });

/**
 * At most `limit` requests in flight; slots are leases that expire after `leaseTtl`. Regional only.
 *
 * @example
 * ```ts
 * const limiter = createLimiter({ redis, limit: concurrency(10, { leaseTtl: '30s' }) });
 * const { allowed, leases } = await limiter.limit('tenant-7');
 * if (allowed) await work().finally(() => limiter.release(leases));
 * ```
 */
export const concurrency = (limit: number, options: { leaseTtl?: Period } = {}): AlgorithmSpec => ({
  algorithm: 'concurrency',
  limit,
  ...(options.leaseTtl !== undefined ? { leaseTtl: options.leaseTtl } : {}),
});

// Algorithms are values: `tokenBucket(1000, '1m')` is a rule fragment, not a subclass.
import type { Rule } from './config/schema.ts';

export type Period = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`;
export type AlgorithmSpec = Pick<Rule, 'algorithm' | 'limit'> & { period?: Period; burst?: number; leaseTtl?: Period };

/** Average `limit` per `period`, bursts up to `burst` (default: limit). The seed's algorithm. */
export const tokenBucket = (limit: number, period: Period, options: { burst?: number } = {}): AlgorithmSpec => ({
  algorithm: 'tokenBucket',
  limit,
  period,
  ...(options.burst !== undefined ? { burst: options.burst } : {}),
});

/** `limit` per calendar window of `period`; simplest, allows a burst at the boundary. */
export const fixedWindow = (limit: number, period: Period): AlgorithmSpec => ({ algorithm: 'fixedWindow', limit, period });

/** Sliding-window counter: constant memory, smooths the boundary burst (approximate). */
export const slidingWindow = (limit: number, period: Period): AlgorithmSpec => ({ algorithm: 'slidingWindow', limit, period });

/** Sliding-window log: exact over any `period`, memory grows with requests. Regional only. */
export const slidingLog = (limit: number, period: Period): AlgorithmSpec => ({ algorithm: 'slidingLog', limit, period });

/** At most `limit` requests in flight; slots are leases that expire after `leaseTtl`. Regional only. */
export const concurrency = (limit: number, options: { leaseTtl?: Period } = {}): AlgorithmSpec => ({
  algorithm: 'concurrency',
  limit,
  ...(options.leaseTtl !== undefined ? { leaseTtl: options.leaseTtl } : {}),
});

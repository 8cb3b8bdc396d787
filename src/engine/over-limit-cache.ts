// Local over-limit cache (the idea of envoy's and Upstash's local caches): once Redis has said a caller is
// exhausted until time T, this instance answers that caller's requests with 429 until T without a Redis hop.
// It only ever denies what Redis just denied, so it cannot add leakage or break exactness inside a region;
// at worst a refund or an incoming share transfer could have admitted a retry slightly earlier. In a
// federation, allowance moved here by peers arrives within about one sync interval, so federated denials are
// held at most that long.
import { LRUCache } from 'lru-cache';
import type { MatchedRule } from './types.ts';
import type { RuleOutcome } from './types.ts';

interface Entry {
  /** Held until then: the retry time, or sooner in a federation (`maxMs`: a grant may arrive before it). */
  untilMs: number;
  /** When Redis said the caller may retry: what a cached answer's retryAfterMs counts down to. */
  retryAtMs: number;
  cost: number;
  outcome: RuleOutcome;
}

export interface OverLimitCache {
  /**
   * A cached denial for any enforcing rule of this request, or undefined. `costOf` is what a rule charges a request
   * of `cost` (chargedCost: a costFromResponse rule its reserve); `cost` itself when omitted.
   */
  lookup(
    matched: readonly MatchedRule[],
    cost: number,
    costOf?: (rule: MatchedRule['rule'], cost: number) => number,
  ): RuleOutcome | undefined;
  /** Cache a denial until its retry time, or for at most `maxMs`. */
  remember(key: string, outcome: RuleOutcome, cost: number, maxMs?: number): void;
  clear(): void;
  /** Drops what is remembered for these state keys (an operator reset them). */
  forget(keys: readonly string[]): void;
  readonly size: number;
}

/** Denials shorter than this are not worth a cache entry. */
const MIN_CACHE_MS = 20;

export function createOverLimitCache(maxEntries: number, now: () => number = Date.now): OverLimitCache {
  // Bounded: the least recently used denial goes first.
  const entries = new LRUCache<string, Entry>({ max: maxEntries });
  return {
    lookup(matched, cost, costOf) {
      if (entries.size === 0) return undefined;
      const at = now();
      for (const { key, rule } of matched) {
        if (rule.shadow) continue;
        const entry = entries.get(key);
        if (!entry) continue;
        if (entry.untilMs <= at) {
          entries.delete(key);
          continue;
        }
        if ((costOf ? costOf(rule, cost) : cost) < entry.cost) continue;
        // Decided from memory, not from a view: whether it would be a false denial is unknown (not flagged).
        // Field by field (a rest copy and a spread cost more than the rest of the lookup on this path).
        const o = entry.outcome;
        return {
          rule: o.rule,
          algorithm: o.algorithm,
          allowed: o.allowed,
          limit: o.limit,
          remaining: 0,
          resetAtMs: o.resetAtMs,
          retryAfterMs: entry.retryAtMs - at,
          periodMs: o.periodMs,
          shadow: o.shadow,
          failMode: o.failMode,
          source: 'cache',
        };
      }
      return undefined;
    },
    remember(key, outcome, cost, maxMs = Infinity) {
      const holdMs = Math.min(outcome.retryAfterMs, maxMs);
      if (holdMs < MIN_CACHE_MS) return;
      const at = now();
      entries.set(key, { untilMs: at + holdMs, retryAtMs: at + outcome.retryAfterMs, cost, outcome });
    },
    forget(keys) {
      for (const key of keys) entries.delete(key);
    },
    clear() {
      entries.clear();
    },
    get size() {
      return entries.size;
    },
  };
}

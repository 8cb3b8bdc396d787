// Local leases for hot keys (rules[].lease; docs/leases.md): a process that sees a key twice within a lease's
// time asks, in the decide call itself, for up to `size` more units of the rule's allowance (lua/includes/
// local_lease.lua). Redis counts them as admissions at once; this process then admits from memory until they are
// spent or the lease ends, and gives back what it did not spend (refund.lua). An unreturned lease (a crash) stays
// spent: the limit holds either way.
import { LRUCache } from 'lru-cache';
import type { Rule } from '../config/schema.ts';
import { windowIdAt } from '../protocol/index.ts';
import type { DecideReply } from '../store/decide-calls.ts';
import { advertisedLimit } from './rules.ts';
import type { MatchedRule, RuleOutcome } from './types.ts';

/** Units of an ended lease to give back: refund.lua's call for one key. */
export interface LeaseReturn {
  rule: Rule;
  key: string;
  shard: number;
  /** The Redis clock of the take (refund.lua finds the window the units were counted in by it). */
  takenAtMs: number;
  units: number;
}

/** One live lease: what this process may still admit for a key from memory. */
interface Held {
  rule: Rule;
  key: string;
  shard: number;
  left: number;
  /** Ends here (this process's clock): the lease's time, and for a window rule never after its window. */
  untilMs: number;
  takenAtMs: number;
  /** The rule's view right after the take (this request admitted, the lease still unspent), for the headers. */
  remaining: number;
  quotaRemaining: number;
  resetAtMs: number;
  spent: number;
}

/** The asks of one call to Redis, by state key (only keys that ask). */
export type LeaseAsks = ReadonlyMap<string, number>;

/**
 * The leases one engine holds.
 *
 * @example
 * ```ts
 * const leases = createLocalLeases();
 * const fromMemory = leases.spend(matched, 1); // the admitted outcomes, or undefined: ask Redis
 * ```
 */
export interface LocalLeases {
  /**
   * An admission from memory, one outcome per matched rule: every matched rule holds a live lease with `cost` units
   * left (each is charged), or undefined and nothing is charged.
   */
  spend(matched: readonly MatchedRule[], cost: number): RuleOutcome[] | undefined;
  /**
   * What a call to Redis for `matched` asks for when every matched rule leases, the key was seen within the lease's
   * time (hot) and no ask for it is already on its way: per rule, what this process is likely to spend within the
   * lease's time at the key's recent rate, at most the lease's size; undefined otherwise. The asks stay in flight
   * until `settled`.
   */
  asks(matched: readonly MatchedRule[]): LeaseAsks | undefined;
  /**
   * Records the units a decide reply took for the rules of one call (in `rules` order), started at `sentAtMs` (this
   * process's clock, before the call was sent). Returns the leases it replaces, to give back.
   */
  took(rules: readonly MatchedRule[], reply: DecideReply, sentAtMs: number): LeaseReturn[];
  /** Ends the asks of a call (answered or failed): the requests waiting on them go on. */
  settled(asks: LeaseAsks): void;
  /**
   * A take on its way for one of these keys (a promise that settles with it), or undefined: a request that finds
   * one waits for it and spends from the lease it brings rather than going to Redis alongside it.
   */
  pending(matched: readonly MatchedRule[]): Promise<void> | undefined;
  /** Removes the leases that have ended and returns their unspent units. */
  expired(): LeaseReturn[];
  /** Ends every lease (the engine closes) and returns their unspent units. */
  drain(): LeaseReturn[];
  /** Drops the leases of these state keys without returning them (an operator reset the keys). */
  forget(keys: readonly string[]): void;
  /** This process's clock, as the leases read it. */
  now(): number;
}

/** At most this many keys are remembered as recently seen (least recently seen first out). */
const SEEN_KEYS = 100_000;

/** The weight of the newest gap between a key's requests in its moving average. */
const GAP_WEIGHT = 0.3;

/** The leases of one engine; `now` is this process's clock (ms). */
export function createLocalLeases(now: () => number = Date.now): LocalLeases {
  const held = new Map<string, Held>();
  // When each key was last decided here, and the mean gap between its requests (ms, a moving average).
  const seen = new LRUCache<string, { at: number; gapMs: number }>({ max: SEEN_KEYS });
  // The asks on their way, by state key: settling one lets the requests that wait on it go on.
  const asking = new Map<string, { settled: Promise<void>; settle: () => void }>();

  const ended = (lease: Held): LeaseReturn => ({
    rule: lease.rule,
    key: lease.key,
    shard: lease.shard,
    takenAtMs: lease.takenAtMs,
    units: lease.left,
  });

  return {
    spend(matched, cost) {
      if (held.size === 0 || matched.length === 0) return undefined;
      const at = now();
      for (const { key } of matched) {
        const lease = held.get(key);
        if (lease === undefined || lease.untilMs <= at || lease.left < cost) return undefined;
      }
      const outcomes: RuleOutcome[] = [];
      for (const { key, rule } of matched) {
        const lease = held.get(key)!;
        lease.left -= cost;
        lease.spent += cost;
        const remaining = Math.max(0, lease.remaining - lease.spent);
        outcomes.push({
          rule: rule.name,
          algorithm: rule.algorithm,
          allowed: true,
          limit: advertisedLimit(rule),
          remaining,
          quotaRemaining: Math.max(remaining, lease.quotaRemaining - lease.spent),
          resetAtMs: lease.resetAtMs,
          retryAfterMs: 0,
          periodMs: rule.period,
          shadow: false,
          failMode: rule.failMode,
          source: 'lease',
        });
      }
      return outcomes;
    },

    asks(matched) {
      if (matched.length === 0) return undefined;
      for (const { rule } of matched) if (rule.lease === undefined) return undefined;
      const at = now();
      let asks: Map<string, number> | undefined;
      for (const { key, rule } of matched) {
        const { size, ttlMs } = rule.lease!;
        const last = seen.get(key);
        if (last === undefined) {
          seen.set(key, { at, gapMs: Number.NaN });
          continue;
        }
        // The first gap seen stands alone; then a moving average.
        const gapMs = Number.isNaN(last.gapMs) ? at - last.at : GAP_WEIGHT * (at - last.at) + (1 - GAP_WEIGHT) * last.gapMs;
        seen.set(key, { at, gapMs });
        if (at - last.at > ttlMs || asking.has(key)) continue;
        asks ??= new Map();
        // What this process is likely to spend within the lease's time, at most `size`: units it would return
        // unspent are units other processes (and, in a federation, other regions) could not use meanwhile.
        asks.set(key, Math.max(1, Math.min(size, Math.ceil(ttlMs / Math.max(gapMs, 0.01)))));
      }
      if (asks) {
        for (const key of asks.keys()) {
          let settle!: () => void;
          const settled = new Promise<void>((resolve) => {
            settle = resolve;
          });
          asking.set(key, { settled, settle });
        }
      }
      return asks;
    },

    took(rules, reply, sentAtMs) {
      const replaced: LeaseReturn[] = [];
      rules.forEach(({ key, rule, shard }, index) => {
        const answer = reply.rules[index]!;
        if (answer.leased <= 0 || rule.lease === undefined) return;
        const previous = held.get(key);
        if (previous !== undefined && previous.left > 0) replaced.push(ended(previous));
        let untilMs = sentAtMs + rule.lease.ttlMs;
        // A window's units were counted in the window of the take: spent only inside it. The reply's clock is
        // Redis's; the time left of the window, counted from before the call was sent, ends no later in real time.
        if (rule.algorithm !== 'tokenBucket') {
          const windowEnd = (windowIdAt(reply.now, rule.period) + 1) * rule.period;
          untilMs = Math.min(untilMs, sentAtMs + (windowEnd - reply.now));
        }
        held.set(key, {
          rule,
          key,
          shard,
          left: answer.leased,
          untilMs,
          takenAtMs: reply.now,
          remaining: answer.remaining,
          quotaRemaining: answer.quotaRemaining,
          resetAtMs: answer.resetAtMs,
          spent: 0,
        });
      });
      return replaced;
    },

    settled(asks) {
      for (const key of asks.keys()) {
        asking.get(key)?.settle();
        asking.delete(key);
      }
    },

    pending(matched) {
      if (asking.size === 0) return undefined;
      for (const { key } of matched) {
        const ask = asking.get(key);
        if (ask) return ask.settled;
      }
      return undefined;
    },

    expired() {
      const at = now();
      const out: LeaseReturn[] = [];
      for (const [key, lease] of held) {
        if (lease.untilMs > at && lease.left > 0) continue;
        held.delete(key);
        if (lease.left > 0) out.push(ended(lease));
      }
      return out;
    },

    drain() {
      const out: LeaseReturn[] = [];
      for (const lease of held.values()) if (lease.left > 0) out.push(ended(lease));
      held.clear();
      seen.clear();
      return out;
    },

    forget(keys) {
      for (const key of keys) held.delete(key);
    },

    now,
  };
}

// In-memory limiter used while the breaker is open, for `failMode: open` rules that opt into it (fail-closed
// rules are never decided here: fail-modes.ts rejects them). It enforces this instance's share of each limit
// (limit / breaker.instancesPerRegion), so N gateways together stay near the regional limit without Redis.
// In a federation the regional limit of a federated rule is the region's share of limit + budget
// (src/protocol portion, the same floor(X·u/S) the Lua scripts use), so a region cut off from its own Redis
// cannot spend the other regions' shares.
//
// Window counts are kept per window and are NOT reset when the breaker closes: a flapping breaker hands out
// one share per window, not one per trip. What a window admitted locally is written to Redis against the same
// window once Redis answers again (`unsettled` / `settled`, see fallback-settlement.ts), so Redis and the
// peers count it.
//
// Every window algorithm degrades to a fixed window (constant state per key), the token bucket stays a
// token bucket, concurrency counts in-flight leases. Memory: at most `capacity` keys, least recently used
// evicted first.
import { chargedCost } from './cost-from-response.ts';
import { randomUUID } from 'node:crypto';
import type { Rule } from '../config/schema.ts';
import { KEPT_WINDOWS, portion } from '../protocol/index.ts';
import { localFallbackKeys, localFallbackRefusalsTotal } from '../metrics.ts';
import { outcomeBase } from './rules.ts';
import type { Lease, RuleOutcome } from './types.ts';

/** The part of a matched rule this limiter needs (structurally a MatchedRule). */
export interface LocalRuleInput {
  rule: Rule;
  /** The rule's state key for this caller; the same key Redis would use. */
  key: string;
  /** The shard of `key` (settlement runs per shard); a MatchedRule always has it, unit tests may omit it (0). */
  shard?: number;
}

/** Admissions of one window decided locally and not yet written to Redis. */
export interface Unsettled {
  rule: Rule;
  key: string;
  shard: number;
  /** Start of the window (epoch ms). */
  windowStart: number;
  count: number;
}

export interface LocalDecision {
  allowed: boolean;
  outcomes: RuleOutcome[];
  leases: Lease[];
}

export interface LocalFallback {
  /** Decide; with `commit` false (another rule denies the request anyway) nothing is consumed. */
  decide(matched: readonly LocalRuleInput[], cost: number, nowMs: number, commit?: boolean): LocalDecision;
  /** Window admissions not yet written to Redis (windows still in Redis's kept range at `nowMs`). */
  unsettled(nowMs: number): Unsettled[];
  /** Redis has counted these admissions. */
  settled(items: readonly Unsettled[]): void;
  /**
   * Drops what can no longer matter at `nowMs` (windows that ended with nothing left to settle, full buckets, idle
   * concurrency counters); counts of a window still running stay, so a flapping breaker does not re-issue them.
   */
  prune(nowMs: number): void;
  /** Release leases taken by `decide`; returns the leases that were not local (for Redis to release). */
  release(leases: readonly Lease[]): Lease[];
  clear(): void;
  readonly size: number;
}

const LOCAL_LEASE_PREFIX = 'local:';
export const DEFAULT_LOCAL_CAPACITY = 100_000;
/** How often a full fallback looks for keys that no longer matter before refusing a new one. */
const PRUNE_WHEN_FULL_MS = 100;

type Entry =
  | { kind: 'window'; windowStart: number; count: number; unsettled: number; rule: Rule; shard: number }
  | { kind: 'bucket'; tokens: number; last: number; fillMs: number }
  | { kind: 'concurrency'; inFlight: number };

interface Proposal {
  input: LocalRuleInput;
  next: Entry;
  outcome: RuleOutcome;
}

function share(total: number, instances: number): number {
  return Math.max(1, Math.floor(total / instances));
}

export interface LocalFallbackOptions {
  instancesPerRegion: number;
  capacity?: number;
  /**
   * While federated: this region's share units (src/protocol shareUnits) and each rule's script budget; a
   * federated rule's regional limit is then portion(amount, units) + portion(budget, units). Alone: the limit.
   */
  federation?: { units: number; budget: (rule: Rule) => number; federated: (rule: Rule) => boolean };
  /**
   * When this process started (epoch ms). A process cannot know what the one it replaces admitted locally before
   * it died: a window that began before `startedAtMs` gets no local allowance here, and a token bucket first seen
   * here starts with what it refilled since `startedAtMs`, not full. Omitted: no such guard (unit tests).
   */
  startedAtMs?: number;
}

/** Why the fallback refused a request it would otherwise have admitted (quotafed_local_fallback_refusals_total). */
export type FallbackRefusal = 'started-mid-window' | 'full';

/** Algorithms whose local admissions are written back to Redis (settle_fallback.lua): the window counters. */
const SETTLED_ALGORITHMS: ReadonlySet<Rule['algorithm']> = new Set(['fixedWindow', 'slidingWindow']);

/** Windows before the current one that Redis still holds (it keeps KEPT_WINDOWS slots per key), so can be settled. */
const SETTLE_WINDOWS = KEPT_WINDOWS - 1;

export function createLocalFallback(options: LocalFallbackOptions): LocalFallback {
  const { federation } = options;
  const regional = (rule: Rule, amount: number): number => {
    if (!federation?.federated(rule)) return amount;
    return portion(amount, federation.units) + portion(Math.max(0, federation.budget(rule)), federation.units);
  };
  const capacity = options.capacity ?? DEFAULT_LOCAL_CAPACITY;
  const startedAtMs = options.startedAtMs ?? Number.NEGATIVE_INFINITY;
  // Never evicts: an evicted key with a running window would get its share again. When it is full of keys that
  // still matter, a new key is refused after a prune (at most one per PRUNE_WHEN_FULL_MS).
  const entries = new Map<string, Entry>();
  let prunedWhenFullAt = Number.NEGATIVE_INFINITY;
  const refused = (rule: Rule, reason: FallbackRefusal) => localFallbackRefusalsTotal.inc({ rule: rule.name, reason });

  const prune = (nowMs: number): void => {
    const finished: string[] = [];
    for (const key of entries.keys()) {
      const entry = entries.get(key)!;
      let done: boolean;
      if (entry.kind === 'window') {
        const ended = entry.windowStart + entry.rule.period <= nowMs;
        const settleable =
          entry.unsettled > 0 &&
          SETTLED_ALGORITHMS.has(entry.rule.algorithm) &&
          entry.windowStart >= nowMs - (nowMs % entry.rule.period) - SETTLE_WINDOWS * entry.rule.period;
        done = ended && !settleable;
      } else if (entry.kind === 'concurrency') {
        done = entry.inFlight <= 0;
      } else {
        // A bucket that has refilled is the same as no entry.
        done = nowMs - entry.last >= entry.fillMs;
      }
      if (done) finished.push(key);
    }
    for (const key of finished) entries.delete(key);
    localFallbackKeys.set(entries.size);
  };

  /** Room for `needed` keys it does not hold: prunes when full (at most once per PRUNE_WHEN_FULL_MS), never evicts. */
  const hasRoom = (now: number, needed: number): boolean => {
    if (entries.size + needed <= capacity) return true;
    if (now - prunedWhenFullAt >= PRUNE_WHEN_FULL_MS) {
      prunedWhenFullAt = now;
      prune(now);
    }
    return entries.size + needed <= capacity;
  };

  const propose = (input: LocalRuleInput, requestCost: number, now: number, room: boolean): Proposal => {
    const { rule } = input;
    // A costFromResponse rule charges its whole reserve: no answer settles a local admission.
    const cost = chargedCost(rule, requestCost);
    const base = { ...outcomeBase(rule), source: 'local-fallback' as const };
    const current = entries.get(input.key);
    if (current === undefined && !room) {
      refused(rule, 'full');
      return {
        input,
        next: { kind: 'concurrency', inFlight: 0 },
        outcome: { ...base, allowed: false, remaining: 0, resetAtMs: now + 1_000, retryAfterMs: 1_000 },
      };
    }

    if (rule.algorithm === 'concurrency') {
      const allowedSlots = share(rule.limit, options.instancesPerRegion);
      const inFlight = current?.kind === 'concurrency' ? current.inFlight : 0;
      const allowed = inFlight + cost <= allowedSlots;
      const after = allowed ? inFlight + cost : inFlight;
      return {
        input,
        next: { kind: 'concurrency', inFlight: after },
        outcome: {
          ...base,
          allowed,
          remaining: Math.max(0, allowedSlots - after),
          resetAtMs: now + rule.leaseTtl,
          retryAfterMs: allowed ? 0 : Math.min(rule.leaseTtl, 1_000),
        },
      };
    }

    if (rule.algorithm === 'tokenBucket') {
      const capacityTokens = share(regional(rule, rule.burst ?? rule.limit), options.instancesPerRegion);
      const ratePerMs = share(regional(rule, rule.limit), options.instancesPerRegion) / rule.period;
      // First seen here: full, or, in a process that started less than a fill ago, what refilled since its start.
      const fresh = Math.min(capacityTokens, Math.max(0, now - startedAtMs) * ratePerMs);
      const previous = current?.kind === 'bucket' ? current : { tokens: fresh, last: now };
      const tokens = Math.min(capacityTokens, previous.tokens + Math.max(0, now - previous.last) * ratePerMs);
      const allowed = tokens >= cost;
      const after = allowed ? tokens - cost : tokens;
      return {
        input,
        next: { kind: 'bucket', tokens: after, last: now, fillMs: Math.ceil((capacityTokens - after) / ratePerMs) },
        outcome: {
          ...base,
          allowed,
          remaining: Math.floor(after),
          resetAtMs: now + Math.ceil((capacityTokens - after) / ratePerMs),
          retryAfterMs: allowed ? 0 : Math.ceil((cost - tokens) / ratePerMs),
        },
      };
    }

    const windowStart = now - (now % rule.period);
    // A window this process did not see start may already hold its predecessor's local admissions.
    const startedMidWindow = windowStart < startedAtMs;
    const allowedCount = startedMidWindow ? 0 : share(regional(rule, rule.limit), options.instancesPerRegion);
    const same = current?.kind === 'window' && current.windowStart === windowStart;
    const count = same ? current.count : 0;
    const unsettled = same ? current.unsettled : 0;
    const allowed = count + cost <= allowedCount;
    if (startedMidWindow) refused(rule, 'started-mid-window');
    const after = allowed ? count + cost : count;
    const resetAtMs = windowStart + rule.period;
    return {
      input,
      next: { kind: 'window', windowStart, count: after, unsettled: allowed ? unsettled + cost : unsettled, rule, shard: input.shard ?? 0 },
      outcome: { ...base, allowed, remaining: Math.max(0, allowedCount - after), resetAtMs, retryAfterMs: allowed ? 0 : resetAtMs - now },
    };
  };

  return {
    decide(matched, cost, nowMs, commit = true) {
      const room = hasRoom(nowMs, new Set(matched.filter((input) => !entries.has(input.key)).map((input) => input.key)).size);
      const proposals = matched.map((input) => propose(input, cost, nowMs, room));
      const allowed = proposals.every((p) => p.outcome.allowed || p.outcome.shadow);
      const leases: Lease[] = [];
      // A denial consumes nothing: state changes only when the whole request is admitted.
      if (allowed && commit) {
        for (const proposal of proposals) {
          if (!proposal.outcome.allowed) continue;
          entries.set(proposal.input.key, proposal.next);
          if (proposal.next.kind === 'concurrency')
            leases.push({ key: proposal.input.key, id: `${LOCAL_LEASE_PREFIX}${randomUUID()}`, slots: cost });
        }
      }
      localFallbackKeys.set(entries.size);
      return { allowed, outcomes: proposals.map((p) => p.outcome), leases };
    },
    release(leases) {
      const remote: Lease[] = [];
      for (const lease of leases) {
        if (!lease.id.startsWith(LOCAL_LEASE_PREFIX)) {
          remote.push(lease);
          continue;
        }
        const entry = entries.get(lease.key);
        if (entry?.kind === 'concurrency') entry.inFlight = Math.max(0, entry.inFlight - lease.slots);
      }
      return remote;
    },
    unsettled(nowMs) {
      const out: Unsettled[] = [];
      for (const key of entries.keys()) {
        const entry = entries.get(key)!;
        if (entry.kind !== 'window' || entry.unsettled <= 0 || !SETTLED_ALGORITHMS.has(entry.rule.algorithm)) continue;
        if (entry.windowStart < nowMs - (nowMs % entry.rule.period) - SETTLE_WINDOWS * entry.rule.period) continue;
        out.push({ rule: entry.rule, key, shard: entry.shard, windowStart: entry.windowStart, count: entry.unsettled });
      }
      return out;
    },
    settled(items) {
      for (const item of items) {
        const entry = entries.get(item.key);
        if (entry?.kind === 'window' && entry.windowStart === item.windowStart) entry.unsettled = Math.max(0, entry.unsettled - item.count);
      }
    },
    prune,
    clear() {
      entries.clear();
      localFallbackKeys.set(0);
    },
    get size() {
      return entries.size;
    },
  };
}

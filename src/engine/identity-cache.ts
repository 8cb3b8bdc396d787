// The state keys of callers seen recently, so a returning caller's key is not hashed again (rules.ts).
//
// One Map per rule, keyed by the caller's dimension value itself when the rule has one dimension (`by: [apiKey]`,
// the common case): the request's own string, so a lookup builds nothing and hashes a string V8 may have hashed
// already; a rule of several dimensions keys by their length-prefixed values. (A single Map under a key built from
// the prefix, the rule and the values cost a concatenation and a fresh string's hash on every lookup: with callers
// that rarely return, 100,000 or 1,000,000 uniform API keys, the cache made matchRules 0.7-1.2 µs a call slower
// than no cache at all; docs/performance.md, hot path, fourteenth pass.)
//
// Bounded by starting afresh when full: a miss costs at most one get and one set, with no recency bookkeeping. (An
// LRU cost more on a miss than hashing the identity again once hashing took 0.75 µs; a Map that dropped its first
// entry on every insert once full slowed down as deleted entries piled up at its head.) A caller that keeps coming
// is back in the cache at its next requests.
//
// Looked up only while it pays: a lookup in a Map of tens of thousands of callers costs a few cache misses, which
// a hit repays (the two SHA-256 and the key it saves) only when most lookups hit. So the cache counts each rule's
// hits over windows of LOOKUP_WINDOW lookups and, while fewer than half hit, looks up only one call in SAMPLE_EVERY
// (to see when it would pay again), drawn at random, and answers the others "unknown" at once. Only the calls looked
// up offer their identities then: a cache that does not pay keeps filling at a sixteenth of the rate, enough for the
// sampled lookups to find returning callers, instead of having an identity set on every call (each one an object the
// old generation then holds: matchRules 11-20% less CPU a call at 100,000 and 1,000,000 uniform callers;
// docs/performance.md, hot path, fifteenth pass). The draw is random so that callers who return in a fixed cycle are
// not always skipped (every 16th call of a cycle of 1,000 callers only ever lands on an eighth of them). The price:
// after a stream of one-off callers, a set of returning ones takes about 16 times as many calls to enter (a caller
// enters at its second sampled call; 1,000 callers cycling: about 35 rounds rather than 2). Measured (fourteenth
// pass): matchRules per call at 1,000,000 uniform callers (2% would hit) 0.9 µs, at 100,000 (26%) 0.3-0.5 µs slower
// with every lookup than with none; at 1,000 callers, 30,000 or Zipf(1.0) over 1,000,000 (77-100% hit) 0.2-1.5 µs
// faster.
//
// In front of it, a doorkeeper (TinyLFU's): one bit per bucket of identities, so an identity enters the cache the
// second time it is seen, not the first. Cleared after MARKS first sightings, so at most 1/4 of its bits are set and
// at most about that share of one-off callers gets in. Without it, a stream of new callers put every identity into
// the cache, where it outlived a young-generation scavenge and was promoted: 6 MB/s of old-generation growth at
// 27,000 new callers/s, mark-compacts of 5-9 ms every few seconds, and an in-process p99 of 4.5-5.4 ms (2.0-2.2 ms
// with it; docs/performance.md, "A doorkeeper in front of the identity cache").

/** Most identities remembered per config: a caller can send unbounded distinct keys. */
export const IDENTITY_CACHE_MAX = 50_000;
const LOG2_BITS = 17;
const BITS = 1 << LOG2_BITS;
const MARKS = BITS / 4;
/** Lookups per verdict on whether looking up pays. */
const LOOKUP_WINDOW = 512;
/** While it does not pay, one call in this many is looked up (a power of two). */
const SAMPLE_EVERY = 16;

export interface Identity {
  key: string;
  principal: string;
  shard: number;
}

/** Identities longer than this are hashed every time: a cache of 8 KB API keys would cost more than it saves. */
const IDENTITY_CACHE_MAX_CHARS = 256;

/**
 * What the cache files the dimension values of a rule under: the value itself for a rule of one dimension, the
 * length-prefixed values otherwise; undefined when too long to keep.
 */
export function identityCacheKey(dimensions: readonly string[]): string | undefined {
  let key: string;
  if (dimensions.length === 1) key = dimensions[0]!;
  else {
    key = '';
    for (const value of dimensions) key += `|${value.length}:${value}`;
  }
  return key.length <= IDENTITY_CACHE_MAX_CHARS ? key : undefined;
}

export interface IdentityCache {
  readonly size: number;
  /**
   * True while fewer than half the lookups for the rule at index `rule` hit: one call in SAMPLE_EVERY, drawn at
   * random, is looked up.
   */
  sampling(rule: number): boolean;
  /** The identity remembered for the rule at index `rule` under `cacheKey` (identityCacheKey). */
  get(rule: number, cacheKey: string): Identity | undefined;
  /**
   * Remembers `identity` if the doorkeeper has seen its identity hash (`hash`, the state key's last part) before,
   * and marks it if not.
   */
  offer(rule: number, cacheKey: string, identity: Identity, hash: string): void;
}

/** One rule's identities and whether looking them up pays (rules differ: a few IPs, a million API keys). */
interface RuleIdentities {
  map: Map<string, Identity>;
  sampling: boolean;
  lookups: number;
  hits: number;
  /** Whether the rule's last `get` looked up (false: a call skipped while sampling). */
  looked: boolean;
}

export function createIdentityCache(): IdentityCache {
  /** Per rule index. */
  const byRule: RuleIdentities[] = [];
  let size = 0;
  const ruleAt = (rule: number): RuleIdentities => {
    let entry = byRule[rule];
    if (entry === undefined) {
      entry = { map: new Map(), sampling: false, lookups: 0, hits: 0, looked: false };
      byRule[rule] = entry;
    }
    return entry;
  };
  // xorshift32: which calls a sampling rule looks up (one in SAMPLE_EVERY, at random).
  let draw = 0x2545f491;
  const skipped = (): boolean => {
    draw ^= draw << 13;
    draw ^= draw >>> 17;
    draw ^= draw << 5;
    return (draw & (SAMPLE_EVERY - 1)) !== 0;
  };
  const seen = new Uint8Array(BITS / 8);
  let marks = 0;

  const admitted = (hash: string): boolean => {
    // The identity hash is base64url of SHA-256: its last four characters (24 random bits) spread over the
    // doorkeeper's bits by a multiplicative hash. Read from the hash, not from the state key that ends in it: the
    // key is a concatenation, and reading a character of one copies it whole first.
    const end = hash.length;
    const tail =
      (hash.charCodeAt(end - 4) << 21) ^ (hash.charCodeAt(end - 3) << 14) ^ (hash.charCodeAt(end - 2) << 7) ^ hash.charCodeAt(end - 1);
    const bit = Math.imul(tail, 0x9e3779b1) >>> (32 - LOG2_BITS);
    const mask = 1 << (bit & 7);
    if ((seen[bit >> 3]! & mask) !== 0) return true;
    seen[bit >> 3]! |= mask;
    if (++marks >= MARKS) {
      seen.fill(0);
      marks = 0;
    }
    return false;
  };

  return {
    get size() {
      return size;
    },
    sampling: (rule) => byRule[rule]?.sampling ?? false,
    get(rule, cacheKey) {
      const entry = ruleAt(rule);
      if (entry.sampling && skipped()) {
        entry.looked = false;
        return undefined;
      }
      entry.looked = true;
      const hit = entry.map.get(cacheKey);
      if (hit !== undefined) entry.hits++;
      if (++entry.lookups === LOOKUP_WINDOW) {
        entry.sampling = entry.hits * 2 < entry.lookups;
        entry.lookups = 0;
        entry.hits = 0;
      }
      return hit;
    },
    offer(rule, cacheKey, identity, hash) {
      const entry = ruleAt(rule);
      // While lookups are sampled only the calls looked up offer: a cache that does not pay is kept filling at a
      // sixteenth of the rate (enough to see when it would pay again), not rewritten on every call.
      if (entry.sampling && !entry.looked) return;
      if (!admitted(hash)) return;
      const { map } = entry;
      // Full: start afresh, unless this identity is already in.
      if (size >= IDENTITY_CACHE_MAX && !map.has(cacheKey)) {
        for (const each of byRule) each?.map.clear();
        size = 0;
      }
      const before = map.size;
      map.set(cacheKey, identity);
      size += map.size - before;
    },
  };
}

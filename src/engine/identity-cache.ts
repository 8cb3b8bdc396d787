// The state keys of callers seen recently, so a returning caller's key is not hashed again (rules.ts).
//
// Bounded by starting afresh when full: a miss costs one get and one set, with no recency bookkeeping. (An LRU cost
// more on a miss than hashing the identity again once hashing took 0.75 µs; a Map that dropped its first entry on
// every insert once full slowed down as deleted entries piled up at its head.) A caller that keeps coming is back
// in the cache at its next requests.
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

export interface Identity {
  key: string;
  principal: string;
  shard: number;
}

export interface IdentityCache {
  readonly size: number;
  get(cacheKey: string): Identity | undefined;
  /** Remembers `identity` if the doorkeeper has seen its state key before (and marks it if not). */
  offer(cacheKey: string, identity: Identity): void;
}

export function createIdentityCache(): IdentityCache {
  const identities = new Map<string, Identity>();
  const seen = new Uint8Array(BITS / 8);
  let marks = 0;

  const admitted = (key: string): boolean => {
    // A state key ends in its identity hash (base64url of SHA-256): its last four characters (24 random bits)
    // spread over the doorkeeper's bits by a multiplicative hash.
    const end = key.length;
    const tail =
      (key.charCodeAt(end - 4) << 21) ^ (key.charCodeAt(end - 3) << 14) ^ (key.charCodeAt(end - 2) << 7) ^ key.charCodeAt(end - 1);
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
      return identities.size;
    },
    get: (cacheKey) => identities.get(cacheKey),
    offer(cacheKey, identity) {
      if (!admitted(identity.key)) return;
      if (identities.size >= IDENTITY_CACHE_MAX) identities.clear();
      identities.set(cacheKey, identity);
    },
  };
}

// What the publisher's lanes are sending each peer right now. The fast lane and the sync round run on their own
// (fast-lane.ts, sync-round.ts) and both read a key's newest state before they send it: when both read a key
// before either has forgotten it in the peer's pending set (ack_pending.lua), both would send the same version
// (a grant, a loud key's first admission), and the peer would merge it twice. A lane claims each key it is about
// to send a peer, and leaves out a key the other lane already has in flight to that peer at the same version or a
// newer one; the lane that holds the claim forgets the key once the peer has it. In memory only: both lanes run
// in the publishing process (the lock holder), and a lost claim can only cost a duplicate, never a key.

/** Keys in flight to each peer, with the version being sent. */
export interface InFlight {
  /**
   * Claims `key` at `version` for the peer with index `peer`; false when a lane already has it in flight to that
   * peer at this version or a newer one (then leave it to that lane: it sends and forgets it).
   */
  claim(peer: number, key: string, version: number): boolean;
  /** Drops a claim made at `version` (sent and forgotten, or not sent: the key stays pending). */
  release(peer: number, key: string, version: number): void;
}

/**
 * An empty set of claims.
 *
 * @example
 * const inFlight = createInFlight();
 * inFlight.claim(1, 'qf:{s3}:per-key:abc', 7); // true: this lane sends it
 * inFlight.claim(1, 'qf:{s3}:per-key:abc', 7); // false: already in flight
 * inFlight.release(1, 'qf:{s3}:per-key:abc', 7);
 */
export function createInFlight(): InFlight {
  const byPeer = new Map<number, Map<string, number>>();
  return {
    claim(peer, key, version) {
      let claims = byPeer.get(peer);
      if (claims === undefined) {
        claims = new Map();
        byPeer.set(peer, claims);
      }
      const held = claims.get(key);
      if (held !== undefined && held >= version) return false;
      claims.set(key, version);
      return true;
    },
    release(peer, key, version) {
      const claims = byPeer.get(peer);
      // Only the claim this lane made: a newer one belongs to the other lane.
      if (claims?.get(key) === version) claims.delete(key);
    },
  };
}

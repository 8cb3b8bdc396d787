// A peer whose meta is never found under this region's prefix may run under another `redis.keyPrefix`: its gossip
// then goes to a queue this region's worker never reads, and ours to one it never reads, so nothing ever merges and
// each region only spends its own allowance, silently. This looks for the peer's meta under any prefix: a SCAN of
// the peer's Redis for `*:meta`, a few steps per call and resumed at the next call, so a large Redis is walked over
// many checks and never in one go. A single Redis only: a Redis Cluster peer is not scanned (the cursor is per node).
import { Cluster, type Redis } from 'ioredis';
import type { KeyLayout } from '../../keys.ts';

/** SCAN steps per call, and keys per step: at most 10,000 keys looked at per call. */
const STEPS = 10;
const COUNT = 1_000;
const META = /^([A-Za-z0-9_-]{1,32}):meta$/;

/** Looks for region `region`'s meta under another prefix; each call walks a little further. */
export interface ForeignPrefixScan {
  /** The other prefix the region's meta was found under, or null (not found so far, a cluster, not connected). */
  next(): Promise<string | null>;
}

/**
 * @example
 * ```ts
 * const scan = foreignPrefixScan(peerClient, layoutOf(config), 'eu-west');
 * const other = await scan.next(); // 'tenant-b' when eu-west's meta is tenant-b:meta
 * ```
 */
export function foreignPrefixScan(client: Redis | Cluster, keys: KeyLayout, region: string): ForeignPrefixScan {
  let cursor = '0';
  let found: string | null = null;
  return {
    async next() {
      if (found !== null || client instanceof Cluster || client.status !== 'ready') return found;
      for (let step = 0; step < STEPS; step++) {
        const [next, names] = await client.scan(cursor, 'MATCH', '*:meta', 'COUNT', COUNT);
        cursor = next;
        for (const name of names) {
          const prefix = META.exec(name)?.[1];
          if (prefix === undefined || prefix === keys.prefix) continue;
          if ((await client.hget(name, 'region')) !== region) continue;
          found = prefix;
          return found;
        }
        if (cursor === '0') break;
      }
      return found;
    },
  };
}

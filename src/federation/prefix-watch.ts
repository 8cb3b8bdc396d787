// Every region of a federation must use the same `redis.keyPrefix`: a peer under another prefix reads its gossip
// from another queue and its meta from another key, so no state ever merges and each region only spends its own
// allowance (as with a topology mismatch, fingerprints.ts). That is safe but silent: when a peer's meta is missing
// under this region's prefix and found under another (gossip/foreign-prefix.ts), it is logged once per peer and shown
// on /readyz as a warning, until the peer's meta shows up under this prefix. A warning, not a readiness problem: on a
// Redis shared by two deployments (what the prefix is for), another federation's region of the same name is found
// there too until this federation's peer has started.
import type { Logger } from 'pino';

export interface PrefixWatch {
  /** A peer's meta found under `theirs`, another prefix; null: found under ours (resolved). */
  observe(peer: string, theirs: string | null): void;
  /** What the operator should check, one line per peer found only under another prefix. */
  warnings(): string[];
}

/**
 * @example
 * ```ts
 * const prefixes = createPrefixWatch('tenant-a', logger);
 * prefixes.observe('eu-west', 'tenant-b');
 * prefixes.warnings(); // ['federation: no tenant-a:meta on eu-west\'s Redis, but a region eu-west runs there under ...']
 * ```
 */
export function createPrefixWatch(ours: string, logger: Logger): PrefixWatch {
  const other = new Map<string, string>();
  const line = (peer: string, theirs: string) =>
    `federation: no ${ours}:meta on ${peer}'s Redis, but a region ${peer} runs there under redis.keyPrefix "${theirs}" ` +
    `(ours is "${ours}"): regions under different prefixes never see each other's gossip; every region of a federation must ` +
    'set the same redis.keyPrefix';
  return {
    observe(peer, theirs) {
      if (theirs === null) {
        if (other.delete(peer))
          logger.info({ event: 'federation.key_prefix_match', peer, keyPrefix: ours }, `${peer} now runs under redis.keyPrefix "${ours}"`);
        return;
      }
      if (other.get(peer) === theirs) return;
      other.set(peer, theirs);
      logger.error({ event: 'federation.key_prefix_mismatch', peer, ours, theirs }, line(peer, theirs));
    },
    warnings: () => [...other].map(([peer, theirs]) => line(peer, theirs)),
  };
}

// Regions that disagree about the federation (names or weights) reject each other's gossip as `fingerprint`: no
// state ever merges, so each region only spends its own allowance. That is safe but silent unless it is said
// once, loudly: each region publishes its fingerprint in its own <prefix>:meta (recovery.ts markStarted), and this
// check reads every peer's, at start-up and then every few seconds, and from rejected gossip too. A mismatch is
// logged once per peer (and once when it is resolved) and keeps /readyz not ready with the reason.
import type { Logger } from 'pino';

export interface FingerprintWatch {
  /** A peer's published fingerprint (null: not known, e.g. its Redis is unreachable or it never started). */
  observe(peer: string, theirs: string | null): void;
  /** Why this region is not ready, one line per mismatched peer. */
  problems(): string[];
}

export function createFingerprintWatch(ours: string, logger: Logger): FingerprintWatch {
  const mismatched = new Map<string, string>();
  return {
    observe(peer, theirs) {
      if (theirs === null) return;
      if (theirs === ours) {
        if (mismatched.delete(peer))
          logger.info({ event: 'federation.fingerprint_match', peer, fingerprint: ours }, `${peer} now agrees on the federation topology`);
        return;
      }
      if (mismatched.get(peer) === theirs) return;
      mismatched.set(peer, theirs);
      logger.error(
        { event: 'federation.fingerprint_mismatch', peer, ours, theirs },
        `${peer} runs another federation topology (region names or weights differ): gossip between us is rejected until every region ` +
          `lists the same regions and weights`,
      );
    },
    problems: () =>
      [...mismatched].map(
        ([peer, theirs]) => `federation: ${peer} has topology fingerprint ${theirs}, ours is ${ours} (region names or weights differ)`,
      ),
  };
}

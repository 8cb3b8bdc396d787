// Rules a peer runs with other parameters than this region (rule-identity.ts): its entries of those rules are
// skipped, each such peer and rule is logged once (and once when they agree again), and /readyz says so.
import type { Logger } from 'pino';

export interface RuleWatch {
  /** The sender's fingerprint of a rule differed from ours (or agrees again: `theirs === ours`). */
  observe(peer: string, rule: string, theirs: string, ours: string): void;
  /** One line per peer and rule in disagreement. */
  problems(): string[];
}

/** `onMismatch` is called when a peer and rule start to disagree (or disagree otherwise than before). */
export function createRuleWatch(logger: Logger, onMismatch?: () => void): RuleWatch {
  const differing = new Map<string, { peer: string; rule: string; theirs: string; ours: string }>();
  return {
    observe(peer, rule, theirs, ours) {
      const id = `${peer}\u0000${rule}`;
      if (theirs === ours) {
        if (differing.delete(id))
          logger.info({ event: 'federation.rule_match', peer, rule }, `${peer} now runs rule "${rule}" with our parameters`);
        return;
      }
      if (differing.get(id)?.theirs === theirs) return;
      differing.set(id, { peer, rule, theirs, ours });
      onMismatch?.();
      logger.error(
        { event: 'federation.rule_mismatch', peer, rule, ours, theirs },
        `${peer} runs rule "${rule}" with other parameters: its gossip of that rule is skipped and each region admits within its own ` +
          `allowance, at the tighter of the two rules' terms, until every region runs the same rule`,
      );
    },
    problems: () =>
      [...differing.values()].map(
        ({ peer, rule, theirs, ours }) =>
          `federation: ${peer} runs rule "${rule}" with other parameters (fingerprint ${theirs}, ours ${ours})`,
      ),
  };
}

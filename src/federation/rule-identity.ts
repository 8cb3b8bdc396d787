// A federated rule's identity is its parameters: algorithm, limit, period, burst, the leakage budget in force for
// it and the max clock skew. Gossip carries each rule's fingerprint with its name (wire.ts), and a receiver merges
// an entry only when the sender's fingerprint of its rule is its own (apply.ts): regions that disagree on a rule
// (a reload one region at a time) never merge each other's counts under the wrong parameters; each decides that
// rule within its own allowance, as in a partition, and says so (rule-watch.ts).
import { createHash } from 'node:crypto';
import { FEDERATED_ALGORITHMS, type Config, type Rule } from '../config/schema.ts';
import { scriptBudget } from '../protocol/index.ts';

/** Characters of a rule fingerprint (base64url of SHA-256). */
export const RULE_FINGERPRINT_CHARS = 8;

/**
 * The fingerprint of a rule's parameters in a federation of `regions`.
 *
 * @example
 * ruleFingerprint(config.rules[0]!, config, 3) // 'Qm9vbGVh'
 */
export function ruleFingerprint(rule: Rule, config: Pick<Config, 'federation'>, regions: number): string {
  const budget = scriptBudget(rule, config.federation.leakageBudget, regions);
  const text = [rule.algorithm, rule.limit, rule.period, rule.burst ?? rule.limit, budget, config.federation.maxClockSkewMs].join('|');
  return createHash('sha256').update(text).digest('base64url').slice(0, RULE_FINGERPRINT_CHARS);
}

/**
 * Every federated rule's fingerprint, by rule name.
 *
 * @example
 * ruleFingerprints(config, 3).get('per-key')
 */
export function ruleFingerprints(config: Pick<Config, 'federation' | 'rules'>, regions: number): Map<string, string> {
  return new Map(
    config.rules
      .filter((rule) => FEDERATED_ALGORITHMS.has(rule.algorithm))
      .map((rule) => [rule.name, ruleFingerprint(rule, config, regions)]),
  );
}

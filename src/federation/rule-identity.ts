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

/**
 * What a region publishes about each federated rule in its own `<prefix>:meta` (`ruleTerms`, JSON by rule name):
 * the fingerprint and the terms a peer that runs the rule with other parameters holds itself to (`tightenRules`).
 * `budget` is the script encoding (-1: unbounded).
 */
export interface RuleTerms {
  fingerprint: string;
  algorithm: string;
  period: number;
  limit: number;
  burst: number;
  budget: number;
  /**
   * The region's `federation.maxClockSkewMs` (every rule carries it: it is part of each fingerprint). Absent from an
   * older peer's terms, which then tightens nothing on skew.
   */
  skew?: number;
}

/** The meta field that holds a region's `RuleTerms`. */
export const RULE_TERMS_FIELD = 'ruleTerms';

/**
 * Every federated rule's terms, by rule name.
 *
 * @example
 * JSON.stringify(ruleTermsOf(config, 3)) // written to <prefix>:meta ruleTerms
 */
export function ruleTermsOf(config: Pick<Config, 'federation' | 'rules'>, regions: number): Record<string, RuleTerms> {
  const terms: Record<string, RuleTerms> = {};
  for (const rule of config.rules) {
    if (!FEDERATED_ALGORITHMS.has(rule.algorithm)) continue;
    terms[rule.name] = {
      fingerprint: ruleFingerprint(rule, config, regions),
      algorithm: rule.algorithm,
      period: rule.period,
      limit: rule.limit,
      burst: rule.burst ?? rule.limit,
      budget: scriptBudget(rule, config.federation.leakageBudget, regions),
      skew: config.federation.maxClockSkewMs,
    };
  }
  return terms;
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= -1;

/** A peer's published terms, or null when absent or not readable (an older peer, or a corrupt field). */
export function parseRuleTerms(text: string | null): Record<string, RuleTerms> | null {
  if (text === null) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const terms: Record<string, RuleTerms> = {};
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    const t = value as Partial<RuleTerms> | null;
    if (
      t === null ||
      typeof t !== 'object' ||
      typeof t.fingerprint !== 'string' ||
      typeof t.algorithm !== 'string' ||
      !isCount(t.period) ||
      !isCount(t.limit) ||
      !isCount(t.burst) ||
      !isCount(t.budget) ||
      (t.skew !== undefined && !(isCount(t.skew) && t.skew >= 0))
    )
      continue;
    terms[name] = t as RuleTerms;
  }
  return terms;
}

/** The smaller of two script budgets, -1 being unbounded. */
const tighterBudget = (a: number, b: number): number => (a < 0 ? b : b < 0 ? a : Math.min(a, b));

/**
 * The rules this region decides with while a peer runs a rule under the same name with other parameters (a reload
 * one region at a time): that rule at the smallest limit, burst and budget among this region's and every such
 * peer's, so each region admits nothing beyond its base at the tighter config (what it admitted before stays
 * counted: a raise stays within the old L + B, a lowering within Σ_r max(admitted before, new base);
 * docs/federation.md §4b). Only peers on the same algorithm and period are comparable (a redefinition fences
 * instead, recovery.ts). A peer that runs a
 * larger `maxClockSkewMs` (every rule's fingerprint differs then) makes this region decide with the larger skew as
 * well: a larger skew only delays a share's return and a fence's end, so it is the tighter assumption. Returns
 * `config` itself when nothing is tightened.
 *
 * @example
 * const decideWith = tightenRules(config, [peerTerms], 3); // the engine's config while the peers disagree
 */
export function tightenRules(config: Config, peers: Iterable<Record<string, RuleTerms>>, regions: number): Config {
  const ours = ruleTermsOf(config, regions);
  const tight = new Map<string, RuleTerms>();
  let skew = config.federation.maxClockSkewMs;
  for (const theirs of peers) {
    for (const [name, peer] of Object.entries(theirs)) {
      const own = tight.get(name) ?? ours[name];
      if (own === undefined || peer.fingerprint === own.fingerprint) continue;
      if (peer.skew !== undefined && peer.skew > skew) skew = peer.skew;
      if (peer.algorithm !== own.algorithm || peer.period !== own.period) continue;
      const next: RuleTerms = {
        ...own,
        limit: Math.min(own.limit, peer.limit),
        burst: Math.min(own.burst, peer.burst),
        budget: tighterBudget(own.budget, peer.budget),
      };
      if (next.limit !== own.limit || next.burst !== own.burst || next.budget !== own.budget) tight.set(name, next);
    }
  }
  if (tight.size === 0 && skew === config.federation.maxClockSkewMs) return config;
  return {
    ...config,
    federation: skew === config.federation.maxClockSkewMs ? config.federation : { ...config.federation, maxClockSkewMs: skew },
    rules: config.rules.map((rule) => {
      const terms = tight.get(rule.name);
      if (terms === undefined) return rule;
      return {
        ...rule,
        limit: terms.limit,
        ...(rule.algorithm === 'tokenBucket' ? { burst: terms.burst } : {}),
        leakageBudget: terms.budget < 0 ? 'unbounded' : terms.budget,
      };
    }),
  };
}

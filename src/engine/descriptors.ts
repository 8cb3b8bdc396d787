// Which rules apply to an Envoy rate limit descriptor (a ShouldRateLimit request), the way envoyproxy/ratelimit
// selects a limit: same domain, the same number of entries, and at each level the same key with the rule's
// value (exact), a "prefix*" value, or no value (any). When several rules match, the most specific wins level
// by level (exact over prefix over any), as in envoyproxy/ratelimit's tree walk; rules with the same pattern
// all apply. The counter is per distinct descriptor values.
import type { Config, EnvoyEntryMatch, Rule } from '../config/schema.ts';
import { stateKeyOf } from '../keys.ts';
import type { DescriptorRequest, MatchedRule } from './types.ts';

interface EnvoyRule {
  rule: Rule;
  pattern: readonly EnvoyEntryMatch[];
}

/** Envoy rules by domain, compiled once per rules array. */
const compiled = new WeakMap<readonly Rule[], Map<string, EnvoyRule[]>>();

function byDomain(rules: readonly Rule[]): Map<string, EnvoyRule[]> {
  let domains = compiled.get(rules);
  if (domains) return domains;
  domains = new Map();
  for (const rule of rules) {
    const envoy = rule.match.envoy;
    if (!envoy) continue;
    const list = domains.get(envoy.domain) ?? [];
    list.push({ rule, pattern: envoy.descriptor });
    domains.set(envoy.domain, list);
  }
  compiled.set(rules, domains);
  return domains;
}

/** True when some rule names this domain. */
export function knownDomain(config: Pick<Config, 'rules'>, domain: string): boolean {
  return byDomain(config.rules).has(domain);
}

/** 3 exact, 2 prefix, 1 any value, 0 no match. */
function levelScore(pattern: EnvoyEntryMatch, key: string, value: string): number {
  if (pattern.key !== key) return 0;
  if (pattern.value === undefined) return 1;
  if (pattern.value.endsWith('*')) return value.startsWith(pattern.value.slice(0, -1)) ? 2 : 0;
  return pattern.value === value ? 3 : 0;
}

/** The metrics endpoint label of Envoy decisions: bounded, since domains come from the config. */
export function envoyEndpoint(domain: string): string {
  return `envoy:${domain}`;
}

export function matchDescriptor(config: Pick<Config, 'rules'>, request: DescriptorRequest): MatchedRule[] {
  const candidates = byDomain(config.rules).get(request.domain);
  if (!candidates) return [];
  const { entries } = request;
  let best: number[] | undefined;
  let chosen: EnvoyRule[] = [];
  for (const candidate of candidates) {
    if (candidate.pattern.length !== entries.length) continue;
    const scores: number[] = [];
    for (let level = 0; level < entries.length; level++) {
      const score = levelScore(candidate.pattern[level]!, entries[level]!.key, entries[level]!.value);
      if (score === 0) break;
      scores.push(score);
    }
    if (scores.length !== entries.length) continue;
    const order = best === undefined ? 1 : compareScores(scores, best);
    if (order > 0) {
      best = scores;
      chosen = [candidate];
    } else if (order === 0) {
      chosen.push(candidate);
    }
  }
  const endpoint = envoyEndpoint(request.domain);
  const dimensions = entries.map((entry) => `${entry.key}=${entry.value}`);
  return chosen.map(({ rule }) => {
    const principal = `${rule.name}|${dimensions.join('|')}`;
    const { key, shard } = stateKeyOf(rule.name, { principal, dimensions });
    return { rule, key, principal, endpoint, shard };
  });
}

function compareScores(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) {
    if (a[i]! !== b[i]!) return a[i]! - b[i]!;
  }
  return 0;
}

// Which rules apply to an Envoy rate limit descriptor (a ShouldRateLimit request), the way envoyproxy/ratelimit
// selects a limit: same domain, the same number of entries, and at each level the same key with the rule's
// value (exact), a "prefix*" value, or no value (any). When several rules match, the most specific wins level
// by level (exact over prefix over any), as in envoyproxy/ratelimit's tree walk; rules with the same pattern
// all apply. The counter is per distinct descriptor values. `replaces`, `unlimited` and Envoy's per-descriptor
// limit override (RateLimitDescriptor.limit) apply as in envoyproxy/ratelimit (planDescriptors, matchDescriptor).
import { hash } from 'node:crypto';
import type { Config, EnvoyEntryMatch, Rule } from '../config/schema.ts';
import { layoutOf } from '../keys.ts';
import type { DescriptorRequest, LimitOverride, MatchedRule } from './types.ts';

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

/** The rules of the most specific pattern that matches the descriptor (before `replaces` and `unlimited`). */
function winners(config: Pick<Config, 'rules'>, request: DescriptorRequest): EnvoyRule[] {
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
  return chosen;
}

/** What the descriptors of one request ask before the engine decides them. */
export interface DescriptorsPlan {
  /** Rules that a rule matched by some descriptor of the request replaces (`replaces`). */
  replaced: ReadonlySet<string>;
  /** Per descriptor: the `unlimited` rule that answers it (OK, nothing counted), when its matched rules are all unlimited. */
  unlimited: Array<Rule | undefined>;
}

/**
 * `replaces` and `unlimited` over a request's descriptors, as envoyproxy/ratelimit applies them: every matched
 * rule's `replaces` (unlimited ones included) are gathered first, then a replaced rule decides nothing for any
 * descriptor of the request. A descriptor with Envoy's limit override is decided by that limit: it neither
 * replaces nor is replaced, and is never unlimited.
 *
 * @example
 * ```ts
 * const plan = planDescriptors(config, descriptors);
 * if (plan.unlimited[0]) return 'OK, not counted';
 * await engine.decide({ ...context, descriptor: { ...descriptors[0], replaced: plan.replaced } });
 * ```
 */
export function planDescriptors(config: Pick<Config, 'rules'>, descriptors: readonly DescriptorRequest[]): DescriptorsPlan {
  const matched = descriptors.map((descriptor) => (descriptor.limit ? [] : winners(config, descriptor).map(({ rule }) => rule)));
  const replaced = new Set(matched.flat().flatMap((rule) => rule.replaces ?? []));
  const unlimited = matched.map((rules) => {
    const live = rules.filter((rule) => !replaced.has(rule.name));
    return live.length > 0 && live.every((rule) => rule.unlimited === true) ? live[0] : undefined;
  });
  return { replaced, unlimited };
}

/**
 * The rule as an override decides it: its algorithm, fail mode and shadow, the override's limit and window
 * (a token bucket's capacity is the override's limit). The rule itself when the override changes nothing.
 */
function overridden(rule: Rule, override: LimitOverride): Rule {
  if (override.requestsPerUnit === rule.limit && override.periodMs === rule.period && rule.burst === undefined) return rule;
  const { burst: _burst, unlimited: _unlimited, ...rest } = rule;
  return { ...rest, limit: override.requestsPerUnit, period: override.periodMs };
}

/**
 * The rule segment of an overridden descriptor's state key: `<rule>.limit-<n>-per-<ms>`, a counter of its own
 * per (rule, override), so a window is never counted under two limits or periods, and peers, which merge a key
 * under the parameters of the rule its segment names, skip it (it names no configured rule) instead of merging
 * it under the rule's. Hashed when too long for a key segment or equal to a configured rule's name.
 */
function overrideKeyName(config: Pick<Config, 'rules'>, rule: Rule, override: LimitOverride): string {
  const readable = `${rule.name}.limit-${override.requestsPerUnit}-per-${override.periodMs}`;
  if (readable.length <= 64 && !config.rules.some((other) => other.name === readable)) return readable;
  const digest = hash('sha256', readable, 'base64url')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, 12);
  return `${rule.name.slice(0, 45)}.limit-${digest}`;
}

/**
 * The rules that decide `request` and each one's state key: the most specific pattern's rules, less those the
 * request's other descriptors replace and the unlimited ones; with Envoy's limit override, that pattern's rules
 * under the override's limit and window.
 *
 * @example
 * ```ts
 * const matched = matchDescriptor(config, { domain: 'edge', entries: [{ key: 'api_key', value: 'k1' }] });
 * console.log(matched.map((m) => m.rule.name)); // e.g. ['per-key']
 * ```
 */
export function matchDescriptor(
  config: Pick<Config, 'rules'> & { redis?: Pick<Config['redis'], 'keyPrefix'> },
  request: DescriptorRequest,
): MatchedRule[] {
  const keys = layoutOf(config);
  const override = request.limit;
  let chosen = winners(config, request);
  if (!override) chosen = chosen.filter(({ rule }) => rule.unlimited !== true && !request.replaced?.has(rule.name));
  if (chosen.length === 0) return [];
  const endpoint = envoyEndpoint(request.domain);
  const dimensions = request.entries.map((entry) => `${entry.key}=${entry.value}`);
  return chosen.map(({ rule }) => {
    const decided = override ? overridden(rule, override) : rule;
    const keyName = decided === rule ? rule.name : overrideKeyName(config, rule, override!);
    const principal = `${rule.name}|${dimensions.join('|')}`;
    const { key, shard } = keys.stateKeyOf(keyName, { principal, dimensions });
    return { rule: decided, key, principal, endpoint, shard };
  });
}

function compareScores(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) {
    if (a[i]! !== b[i]!) return a[i]! - b[i]!;
  }
  return 0;
}

// Which rules apply to a request, and the state key each one uses.
// Route patterns are matched with Hono's own TrieRouter, compiled once per config.
import { TrieRouter } from 'hono/router/trie-router';
import type { Config, Dimension, Rule } from '../config/schema.ts';
import { layoutOf, type KeyLayout } from '../keys.ts';
import { matchDescriptor } from './descriptors.ts';
import { configuredPlan } from './plans.ts';
import { createIdentityCache, identityCacheKey, type Identity, type IdentityCache } from './identity-cache.ts';
import type { MatchedRule, PlanChoice, RequestContext } from './types.ts';

interface CompiledRule {
  rule: Rule;
  /** Which dimension value is the principal (the API key, else the IP); -1: the rule name and all values. */
  principalAt: number;
  /** A rule a plan derives (`per-key.plan-pro`): decided only in place of its plan-aware rule, never on its own. */
  derived: boolean;
  /** A plan-aware rule: per plan, the index of the rule that decides it, or null (unlimited). */
  plans: Map<string, number | null> | undefined;
}

interface CompiledRules {
  /** Undefined when no rule names endpoints: nothing to route. */
  router: TrieRouter<{ index: number; pattern: string }> | undefined;
  rules: readonly CompiledRule[];
  /** Callers' state keys per key prefix, so a returning caller's key is not hashed again. */
  identities: Map<string, IdentityCache>;
}

const compiled = new WeakMap<readonly Rule[], CompiledRules>();

function compile(config: Pick<Config, 'rules'> & Partial<Pick<Config, 'plans'>>): CompiledRules {
  const { rules } = config;
  let result = compiled.get(rules);
  if (result) return result;
  const router = new TrieRouter<{ index: number; pattern: string }>();
  let routes = 0;
  rules.forEach((rule, index) => {
    for (const pattern of rule.match.endpoints ?? []) {
      router.add('ALL', pattern, { index, pattern });
      routes++;
    }
  });
  const indexOf = new Map(rules.map((rule, index) => [rule.name, index]));
  const derived = config.plans?.derived ?? {};
  const planRoutes = config.plans?.routes ?? {};
  const byRule = rules.map((rule): CompiledRule => {
    const apiKeyAt = rule.by.indexOf('apiKey');
    const route = Object.hasOwn(planRoutes, rule.name) ? planRoutes[rule.name]! : undefined;
    return {
      rule,
      principalAt: apiKeyAt !== -1 ? apiKeyAt : rule.by.indexOf('ip'),
      derived: Object.hasOwn(derived, rule.name),
      plans: route && new Map(Object.entries(route).map(([plan, name]) => [plan, name === null ? null : (indexOf.get(name) ?? null)])),
    };
  });
  result = {
    router: routes > 0 ? router : undefined,
    rules: byRule,
    identities: new Map(),
  };
  compiled.set(rules, result);
  return result;
}

/** The limit outcomes and headers report: a token bucket's capacity (burst), every other rule's limit. */
export function advertisedLimit(rule: Rule): number {
  return rule.algorithm === 'tokenBucket' ? (rule.burst ?? rule.limit) : rule.limit;
}

/** The fields of a rule's outcome that do not depend on the decision (fail modes and the local fallback). */
export function outcomeBase(rule: Rule) {
  return {
    rule: rule.name,
    algorithm: rule.algorithm,
    limit: advertisedLimit(rule),
    periodMs: rule.period,
    shadow: rule.shadow,
    failMode: rule.failMode,
  };
}

/** Entries in the identity cache of these rules (for tests of its bound). */
export function identityCacheSize(config: Pick<Config, 'rules' | 'redis'>): number {
  return compile(config).identities.get(layoutOf(config).prefix)?.size ?? 0;
}

function dimensionValue(dimension: Dimension, request: RequestContext, endpoint: string | undefined, method: string): string | undefined {
  switch (dimension) {
    case 'apiKey':
      return request.apiKey;
    case 'ip':
      return request.ip;
    case 'endpoint':
      return endpoint ?? request.path;
    case 'method':
      return method;
  }
}

function identityApplies(rule: Rule, hasKey: boolean): boolean {
  if (rule.match.identity === 'apiKey') return hasKey;
  if (rule.match.identity === 'anonymous') return !hasKey;
  return true;
}

/** The identity cache of these rules under this layout's prefix: two layouts over the same rules never share one. */
function identitiesOf(compiledRules: CompiledRules, keys: KeyLayout): IdentityCache {
  let cache = compiledRules.identities.get(keys.prefix);
  if (cache === undefined) {
    cache = createIdentityCache();
    compiledRules.identities.set(keys.prefix, cache);
  }
  return cache;
}

function identityOf(keys: KeyLayout, cache: IdentityCache, index: number, entry: CompiledRule, dimensions: readonly string[]): Identity {
  // The principal is one of the dimension values or derived from all of them, so the rule and the values decide
  // the key.
  const cacheKey = identityCacheKey(dimensions);
  if (cacheKey !== undefined) {
    const hit = cache.get(index, cacheKey);
    if (hit) return hit;
  }
  const { rule, principalAt } = entry;
  const principal = principalAt !== -1 ? dimensions[principalAt]! : `${rule.name}|${dimensions.join('|')}`;
  const { key, shard, hash } = keys.stateKeyOf(rule.name, { principal, dimensions });
  const identity = { key, principal, shard };
  if (cacheKey !== undefined) cache.offer(index, cacheKey, identity, hash);
  return identity;
}

/** The rule a plan-aware rule decides by under `plan`: its index, or null (unlimited); the rule itself without a plan. */
function routed(entry: CompiledRule, index: number, plan: string | undefined): number | null {
  if (plan === undefined) return index;
  const target = entry.plans!.get(plan);
  return target === undefined ? index : target;
}

/**
 * The rules that decide a plan-aware rule (at `index`) for this choice: the plan's rule and, while the change from
 * the previous plan is younger than the longer of the two rules' periods plus maxClockSkewMs, the previous plan's
 * too (both must admit). Empty: unlimited.
 */
function planRules(rules: readonly CompiledRule[], index: number, choice: PlanChoice, skewMs: number): number[] {
  const entry = rules[index]!;
  const current = routed(entry, index, choice.plan);
  if (choice.changedAt === undefined) return current === null ? [] : [current];
  const previous = routed(entry, index, choice.previous);
  if (previous === current) return current === null ? [] : [current];
  const period = Math.max(current === null ? 0 : rules[current]!.rule.period, previous === null ? 0 : rules[previous]!.rule.period);
  const open = (choice.now ?? Date.now()) < choice.changedAt + period + skewMs;
  const chosen = open ? [current, previous] : [current];
  return chosen.filter((at): at is number => at !== null);
}

/**
 * The rules of `config` that apply to `request`, each with the Redis state key of this caller under it.
 *
 * @example
 * ```ts
 * const matched = matchRules(config, { apiKey: 'api-key-42', ip: '203.0.113.9', method: 'GET', path: '/search' });
 * console.log(matched.map((m) => m.rule.name)); // e.g. ['per-key', 'search']
 * ```
 */
export function matchRules(
  config: Pick<Config, 'rules'> & Partial<Pick<Config, 'plans' | 'federation'>> & { redis?: Pick<Config['redis'], 'keyPrefix'> },
  request: RequestContext,
  onUnlimited?: (rule: Rule, endpoint: string | undefined) => void,
): MatchedRule[] {
  if (request.descriptor) return matchDescriptor(config, request.descriptor);
  const keys = layoutOf(config);
  const compiledRules = compile(config);
  const { router, rules } = compiledRules;
  const identities = identitiesOf(compiledRules, keys);
  let endpointOf: Map<number, string> | undefined;
  if (router) {
    const [routes] = router.match('ALL', request.path);
    endpointOf = new Map();
    for (const [route] of routes) {
      if (!endpointOf.has(route.index)) endpointOf.set(route.index, route.pattern);
    }
  }
  const method = request.method.toUpperCase();
  const hasKey = request.apiKey !== undefined && request.apiKey !== '';
  const matched: MatchedRule[] = [];
  for (let index = 0; index < rules.length; index++) {
    const entry = rules[index]!;
    const { rule } = entry;
    if (rule.match.envoy || entry.derived) continue;
    if (!identityApplies(rule, hasKey)) continue;
    if (rule.match.methods && !rule.match.methods.includes(method)) continue;
    const endpoint = endpointOf?.get(index);
    if (rule.match.endpoints && endpoint === undefined) continue;
    const dimensions: string[] = [];
    let complete = true;
    for (const dimension of rule.by) {
      const value = dimensionValue(dimension, request, endpoint, method);
      if (value === undefined || value === '') {
        complete = false;
        break;
      }
      dimensions.push(value);
    }
    if (!complete) continue;
    if (entry.plans === undefined) {
      const { key, principal, shard } = identityOf(keys, identities, index, entry, dimensions);
      matched.push({ rule, key, principal, endpoint, shard });
      continue;
    }
    // A plan-aware rule: the rules of the caller's plan (and of the previous one in a transition) decide it.
    const choice = request.plan ?? { plan: config.plans ? configuredPlan(config.plans, request.apiKey ?? '') : undefined };
    const deciding = planRules(rules, index, choice, config.federation?.maxClockSkewMs ?? 0);
    if (deciding.length === 0) onUnlimited?.(rule, endpoint);
    for (const at of deciding) {
      const { key, principal, shard } = identityOf(keys, identities, at, rules[at]!, dimensions);
      matched.push({ rule: rules[at]!.rule, key, principal, endpoint, shard });
    }
  }
  return matched;
}

// Which rules apply to a request, and the state key each one uses.
// Route patterns are matched with Hono's own TrieRouter, compiled once per config.
import { TrieRouter } from 'hono/router/trie-router';
import type { Config, Dimension, Rule } from '../config/schema.ts';
import { ruleKey } from '../keys.ts';
import type { RequestContext } from './types.ts';

export interface MatchedRule {
  rule: Rule;
  /** The Redis state key of this rule for this caller. */
  key: string;
  /** The API key, IP or other value that decides the cluster slot. */
  principal: string;
  /** The route pattern that matched (metrics label), when the rule names endpoints. */
  endpoint: string | undefined;
}

interface CompiledRules {
  router: TrieRouter<{ index: number; pattern: string }>;
  rules: readonly Rule[];
}

const compiled = new WeakMap<readonly Rule[], CompiledRules>();

function compile(rules: readonly Rule[]): CompiledRules {
  let result = compiled.get(rules);
  if (result) return result;
  const router = new TrieRouter<{ index: number; pattern: string }>();
  rules.forEach((rule, index) => {
    for (const pattern of rule.match.endpoints ?? []) router.add('ALL', pattern, { index, pattern });
  });
  result = { router, rules };
  compiled.set(rules, result);
  return result;
}

function dimensionValue(dimension: Dimension, request: RequestContext, endpoint: string | undefined): string | undefined {
  switch (dimension) {
    case 'apiKey':
      return request.apiKey;
    case 'ip':
      return request.ip;
    case 'endpoint':
      return endpoint ?? request.path;
    case 'method':
      return request.method.toUpperCase();
  }
}

function identityApplies(rule: Rule, request: RequestContext): boolean {
  const hasKey = request.apiKey !== undefined && request.apiKey !== '';
  if (rule.match.identity === 'apiKey') return hasKey;
  if (rule.match.identity === 'anonymous') return !hasKey;
  return true;
}

export function matchRules(config: Pick<Config, 'rules'>, request: RequestContext): MatchedRule[] {
  const { router, rules } = compile(config.rules);
  const endpointOf = new Map<number, string>();
  const [routes] = router.match('ALL', request.path);
  for (const [route] of routes) {
    if (!endpointOf.has(route.index)) endpointOf.set(route.index, route.pattern);
  }
  const method = request.method.toUpperCase();
  const matched: MatchedRule[] = [];
  rules.forEach((rule, index) => {
    if (!identityApplies(rule, request)) return;
    if (rule.match.methods && !rule.match.methods.includes(method)) return;
    const endpoint = endpointOf.get(index);
    if (rule.match.endpoints && endpoint === undefined) return;
    const dimensions: string[] = [];
    for (const dimension of rule.by) {
      const value = dimensionValue(dimension, request, endpoint);
      if (value === undefined || value === '') return;
      dimensions.push(value);
    }
    const principal =
      (rule.by.includes('apiKey') ? request.apiKey : undefined) ??
      (rule.by.includes('ip') ? request.ip : undefined) ??
      `${rule.name}|${dimensions.join('|')}`;
    matched.push({ rule, key: ruleKey(rule.name, { principal, dimensions }), principal, endpoint });
  });
  return matched;
}

// Plans per API key (`plans` in the config, docs/plans.md): each (plan-aware rule, plan) pair whose parameters
// differ from the rule's becomes a configured rule of its own at load, `<rule>.plan-<plan>`, so every region holds
// the same derived rules, each with its own fingerprint and state keys, federated like any rule. A request's plan
// then picks which of them decides it (src/engine/rules.ts). This file holds what does not depend on the rule
// schema: the names, the checks and the expansion; the zod part is `Plans` in schema.ts.

/** The value of a tier (or of one rule in a tier) that skips the plan-aware rules. */
export const UNLIMITED = 'unlimited';

/** The names a plan may have (they appear in derived rule names, which state keys carry). */
export const PLAN_NAME = /^[A-Za-z0-9_-]{1,32}$/;

/** What a plan changes in one rule: its limit and, optionally, burst and period. */
export interface PlanOverride {
  limit?: number | undefined;
  burst?: number | undefined;
  period?: number | undefined;
}

/** One tier: `unlimited` (every plan-aware rule skipped) or per rule name its override or `unlimited`. */
export type PlanTier = typeof UNLIMITED | Record<string, PlanOverride | typeof UNLIMITED>;

/** The `plans` section as written (defaults filled in). */
export interface PlansSection {
  /** The plan of an API key no assignment names; absent: such keys are decided by the rules as written. */
  default?: string | undefined;
  tiers: Record<string, PlanTier>;
  /** API key → plan, from the config file. */
  keys: Record<string, string>;
}

/**
 * Per plan-aware rule, per plan: the name of the rule that decides a key on that plan (the rule itself when the
 * plan changes nothing in it, `<rule>.plan-<plan>` otherwise), or null when the plan makes it unlimited.
 */
export type PlanRoutes = Record<string, Record<string, string | null>>;

/** The `plans` section as the config holds it after load: as written, plus the routes and derived rules. */
export interface Plans extends PlansSection {
  routes: PlanRoutes;
  /** Derived rule name → the configured rule it derives from (matchRules never matches these on their own). */
  derived: Record<string, string>;
}

/** The fields of a rule the expansion reads and writes. */
interface RuleLike {
  name: string;
  by: readonly string[];
  limit: number;
  period: number;
  burst?: number | undefined;
  match: { envoy?: unknown };
}

/**
 * The name of the rule a plan derives from a configured rule.
 *
 * @example
 * ```ts
 * derivedRuleName('per-key', 'pro'); // 'per-key.plan-pro'
 * ```
 */
export function derivedRuleName(rule: string, plan: string): string {
  return `${rule}.plan-${plan}`;
}

/** One problem of a `plans` section, with its path under `plans`. */
export interface PlanProblem {
  path: Array<string | number>;
  message: string;
}

/**
 * What is wrong with a `plans` section against the config's rules: unknown default or assigned plan, a tier naming
 * an unknown rule or one not keyed by apiKey, a derived name that is too long or taken.
 *
 * @example
 * ```ts
 * planProblems({ default: 'gold', tiers: { free: {} }, keys: {} }, rules);
 * // [{ path: ['default'], message: 'no plan "gold" in plans.tiers (known: free)' }]
 * ```
 */
export function planProblems(plans: PlansSection, rules: readonly RuleLike[]): PlanProblem[] {
  const problems: PlanProblem[] = [];
  const tiers = Object.keys(plans.tiers);
  const unknownPlan = (plan: string) => `no plan "${plan}" in plans.tiers (known: ${tiers.join(', ') || 'none'})`;
  if (plans.default !== undefined && !tiers.includes(plans.default))
    problems.push({ path: ['default'], message: unknownPlan(plans.default) });
  for (const [key, plan] of Object.entries(plans.keys)) {
    if (!tiers.includes(plan)) problems.push({ path: ['keys', key], message: unknownPlan(plan) });
  }
  const names = new Set(rules.map((rule) => rule.name));
  for (const [plan, tier] of Object.entries(plans.tiers)) {
    if (!PLAN_NAME.test(plan)) {
      problems.push({ path: ['tiers', plan], message: 'plan names use letters, digits, "_" and "-" (1-32 chars)' });
      continue;
    }
    if (tier === UNLIMITED) continue;
    for (const [ruleName, override] of Object.entries(tier)) {
      const rule = rules.find((candidate) => candidate.name === ruleName);
      const path = ['tiers', plan, ruleName];
      if (!rule) {
        problems.push({ path, message: `no rule named "${ruleName}"` });
        continue;
      }
      if (rule.match.envoy !== undefined || !rule.by.includes('apiKey')) {
        problems.push({ path, message: `rule "${ruleName}" is not keyed by apiKey: only rules with apiKey in "by" can take a plan` });
        continue;
      }
      if (override === UNLIMITED) continue;
      const derived = derivedRuleName(ruleName, plan);
      if (derived.length > 64) problems.push({ path, message: `the derived rule name "${derived}" is longer than 64 characters` });
      else if (names.has(derived)) problems.push({ path, message: `the derived rule name "${derived}" is taken by a configured rule` });
    }
  }
  return problems;
}

/** The rules a tier names (or every plan-aware rule for an `unlimited` tier). */
function awareRules(tiers: PlansSection['tiers']): Set<string> {
  const aware = new Set<string>();
  for (const tier of Object.values(tiers)) if (tier !== UNLIMITED) for (const name of Object.keys(tier)) aware.add(name);
  return aware;
}

/**
 * The rules plus those the plans derive, and the routes from (rule, plan) to the rule that decides it. A rule is
 * plan-aware when some tier names it; an `unlimited` tier makes every plan-aware rule unlimited. A plan that
 * changes nothing of a rule decides by the rule itself; a derived rule's burst follows its limit unless the plan
 * sets it.
 *
 * @example
 * ```ts
 * const { rules, plans } = expandPlans({ rules, plans: { default: 'free', tiers: { free: { 'per-key': { limit: 100 } } }, keys: {} } });
 * plans.routes['per-key']!.free; // 'per-key.plan-free'
 * ```
 */
export function expandPlans<R extends RuleLike>(config: { rules: R[]; plans: PlansSection }): { rules: R[]; plans: Plans } {
  const { tiers } = config.plans;
  const aware = awareRules(tiers);
  const rules = [...config.rules];
  const routes: PlanRoutes = {};
  const derived: Record<string, string> = {};
  for (const base of config.rules) {
    if (!aware.has(base.name)) continue;
    const byPlan: Record<string, string | null> = {};
    for (const [plan, tier] of Object.entries(tiers)) {
      const override = tier === UNLIMITED ? UNLIMITED : tier[base.name];
      if (override === UNLIMITED) {
        byPlan[plan] = null;
        continue;
      }
      const limit = override?.limit ?? base.limit;
      const period = override?.period ?? base.period;
      const burst = override?.burst ?? (override?.limit !== undefined ? undefined : base.burst);
      if (limit === base.limit && period === base.period && burst === base.burst) {
        byPlan[plan] = base.name;
        continue;
      }
      const name = derivedRuleName(base.name, plan);
      const { burst: _burst, ...rest } = base;
      rules.push({ ...rest, name, limit, period, ...(burst !== undefined ? { burst } : {}) } as R);
      derived[name] = base.name;
      byPlan[plan] = name;
    }
    routes[base.name] = byPlan;
  }
  return { rules, plans: { ...config.plans, routes, derived } };
}

/**
 * A loaded config back to what was written: without the rules its plans derived and the plans' routes, so a
 * loaded config spread into another (`parseConfig({ ...config, port: 0 })`) loads again to the same rules.
 * Anything else passes unchanged.
 *
 * @example
 * ```ts
 * const again = parseConfig({ ...config, port: 0 }); // parseConfig applies it first
 * ```
 */
export function unexpandPlans(input: unknown): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const config = input as { plans?: unknown; rules?: unknown };
  const plans = config.plans as Partial<Plans> | undefined;
  if (typeof plans !== 'object' || plans === null || (plans.derived === undefined && plans.routes === undefined)) return input;
  const { routes: _routes, derived, ...written } = plans;
  const derivedNames = new Set(Object.keys(derived ?? {}));
  const rules = Array.isArray(config.rules)
    ? config.rules.filter((rule) => !derivedNames.has((rule as { name?: unknown }).name as string))
    : config.rules;
  return { ...config, plans: written, rules };
}

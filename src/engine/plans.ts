// A caller's plan (docs/plans.md): the admin API's assignment (the region's Redis, src/engine/admin-plans.ts), else
// the config's `plans.keys`, else `plans.default`. A change of plan (an assignment, or a reload that changes what the
// config gives the key) opens a transition: for the longer period of the old and the new rule plus maxClockSkewMs
// after the change, a plan-aware rule decides the key under both plans' rules (src/engine/rules.ts), so the window
// of the change admits at most min(L_old, spent_old + L_new) + B.
import type { Config } from '../config/schema.ts';
import type { PlanChoice } from './types.ts';

/**
 * One assignment from the admin API, as stored and gossiped: the plan (null: the assignment was deleted, the key is
 * back on the config's plan), the plan the key had where it was written (null: none), when (epoch ms, the writer's
 * clock) and where. The newest `at` wins (ties: the greater region name), in every region whatever the order.
 */
export interface PlanAssignment {
  plan: string | null;
  previous: string | null;
  at: number;
  region: string;
}

/**
 * True when `a` wins over `b` (last writer wins by `at`, then by region name).
 *
 * @example
 * ```ts
 * newer({ plan: 'pro', previous: null, at: 2, region: 'eu-west' }, { plan: 'free', previous: null, at: 1, region: 'us-east' }); // true
 * ```
 */
export function newer(a: PlanAssignment, b: PlanAssignment): boolean {
  return a.at !== b.at ? a.at > b.at : a.region > b.region;
}

/** The plan the config gives a key (undefined: none; plan-aware rules decide it as written). */
export function configuredPlan(plans: Config['plans'], apiKey: string): string | undefined {
  return Object.hasOwn(plans.keys, apiKey) ? plans.keys[apiKey] : plans.default;
}

/** A plan the config knows, else undefined (a tier removed by a reload decides nothing any more). */
function known(plans: Config['plans'], plan: string | null | undefined): string | undefined {
  return plan !== null && plan !== undefined && Object.hasOwn(plans.tiers, plan) ? plan : undefined;
}

/** True when some rule of `config` takes its limit from the caller's plan. */
export function hasPlanRules(config: Partial<Pick<Config, 'plans'>>): boolean {
  return config.plans !== undefined && Object.keys(config.plans.routes).length > 0;
}

const transitions = new WeakMap<object, number>();

/** The longest transition any plan change of this config can need: the longest plan-aware period plus the skew. */
export function longestTransitionMs(config: Pick<Config, 'plans' | 'rules' | 'federation'>): number {
  const cached = transitions.get(config.plans);
  if (cached !== undefined) return cached;
  const names = new Set(Object.keys(config.plans.routes));
  for (const derived of Object.keys(config.plans.derived)) names.add(derived);
  let period = 0;
  for (const rule of config.rules) if (names.has(rule.name)) period = Math.max(period, rule.period);
  const longest = period + config.federation.maxClockSkewMs;
  transitions.set(config.plans, longest);
  return longest;
}

/** The config in force before the last reload, while a key whose configured plan it changed may be in transition. */
export interface ReloadedPlans {
  plans: Config['plans'];
  at: number;
}

/**
 * The plan that decides `apiKey` now, and the one it changes from while a transition may be open.
 *
 * @example
 * ```ts
 * const choice = choosePlan(config, assignments.get('partner-key'), 'partner-key', Date.now());
 * // { plan: 'pro', previous: 'free', changedAt: 1767225600000 }
 * ```
 */
export function choosePlan(
  config: Pick<Config, 'plans' | 'rules' | 'federation'>,
  assignment: PlanAssignment | undefined,
  apiKey: string,
  now: number,
  reloaded?: ReloadedPlans,
): PlanChoice {
  const { plans } = config;
  const fromConfig = known(plans, configuredPlan(plans, apiKey));
  const plan = assignment && assignment.plan !== null ? (known(plans, assignment.plan) ?? fromConfig) : fromConfig;
  const horizon = now - longestTransitionMs(config);
  if (assignment && assignment.at > horizon) {
    const previous = known(plans, assignment.previous);
    if (previous !== plan) return { plan, previous, changedAt: assignment.at, now };
  }
  if (reloaded && reloaded.at > horizon && (!assignment || assignment.plan === null)) {
    const previous = known(plans, configuredPlan(reloaded.plans, apiKey));
    if (previous !== plan) return { plan, previous, changedAt: reloaded.at, now };
  }
  return { plan };
}

// The protocol's parameters: share units, the demand-following policy, the leakage budget, and the per-rule
// FederationParams that every other file of the protocol takes, with the window-id and fence conventions.
// Lua mirror: lua/includes/federation.lua (rule_params, parse_units, portion) and lua/includes/rebalance.lua
// (parse_policy); the scripts get these values as arguments.
import type { LeakageBudget, Rule } from '../config/schema.ts';

/** Share units: a region's weight, a token-bucket share and every "X·ω" product are expressed in 1/S. */
export const SHARE_UNITS = 1_000_000;

/**
 * Demand-following transfer policy. Passed to the Lua as arguments, so every tunable lives here.
 * - hungerFraction: a region is hungry once it used more than this fraction of its allowance.
 * - reserveFraction: a giver always keeps this fraction of its base share unused (plus what it has used).
 * - giveFraction: the fraction of its surplus a giver hands out per rebalance, split over the hungry peers.
 * - minSurplus: no transfer below this surplus (requests, or share units for token buckets).
 * - idleMs: a region that admitted nothing for this long (by its last admission time in the view) is idle:
 *   it is never hungry and keeps no reserve for its past use, so allowance follows traffic that moves. A
 *   region that has stopped in this window (epoch: no admission for idleMs/5, and ten of its average gaps when its
 *   traffic carried over from the previous one; demand.ts stopped) is a free donor: it gives everything but one
 *   request (nothing for buckets, nothing in the last tenth of a window) to its hungry and active peers.
 */
export const REBALANCE = {
  hungerFraction: 0.5,
  reserveFraction: 0.02,
  giveFraction: 0.5,
  minSurplus: 1,
  idleMs: 5_000,
} as const;

/** The tunables of the demand-following transfers (REBALANCE, or a test's override). */
export interface RebalancePolicy {
  hungerFraction: number;
  reserveFraction: number;
  giveFraction: number;
  minSurplus: number;
  idleMs: number;
}

/** Budgets above this are clamped (keeps B·u below 2^53). */
const MAX_BUDGET = 1_000_000_000;

/** Everything one region needs to decide for one rule. Built once per rule; the Lua gets the same values. */
export interface FederationParams {
  /** Number of regions N; the region indexes are 0..N-1 in name order. */
  regions: number;
  /** This region's index. */
  self: number;
  /** Share units per region (Σ ≤ SHARE_UNITS), see shareUnits(). */
  units: readonly number[];
  /** L: requests per window, or tokens refilled per period. */
  limit: number;
  /** P in ms. */
  periodMs: number;
  /** C: token bucket capacity (burst ?? limit); unused by windows. */
  capacity: number;
  /** B: leakage budget in requests; null means "unbounded" (plain gossip, no local limit, no guarantee). */
  budget: number | null;
  /** Bound on the clock skew between any two regions' Redis servers. */
  maxClockSkewMs: number;
  rebalance: RebalancePolicy;
}

/** What federationParams builds FederationParams from: the topology's weights and one rule's config. */
export interface ParamsInput {
  regions: number;
  self: number;
  weights: readonly number[];
  limit: number;
  periodMs: number;
  burst?: number | undefined;
  leakageBudget: LeakageBudget;
  maxClockSkewMs: number;
  rebalance?: Partial<RebalancePolicy> | undefined;
}

/** FederationParams of one rule for region `self`: share units from the weights, B resolved, the policy defaulted. */
export function federationParams(input: ParamsInput): FederationParams {
  if (input.weights.length !== input.regions) throw new Error('one weight per region');
  if (input.self < 0 || input.self >= input.regions) throw new Error('self index out of range');
  return {
    regions: input.regions,
    self: input.self,
    units: shareUnits(input.weights),
    limit: input.limit,
    periodMs: input.periodMs,
    capacity: input.burst ?? input.limit,
    budget: resolveLeakageBudget(input.limit, input.leakageBudget, input.regions),
    maxClockSkewMs: input.maxClockSkewMs,
    rebalance: { ...REBALANCE, ...input.rebalance },
  };
}

/**
 * Integer share units u_r = floor(S·w_r / Σw). Float rounding could in theory push Σu above S; the excess is
 * taken from the last regions, so Σu ≤ S always holds. Then floor(X·u_r/S) is exact for X ≤ 10^9.
 */
export function shareUnits(weights: readonly number[]): number[] {
  let total = 0;
  for (const weight of weights) total += weight;
  const units = weights.map((weight) => Math.floor((SHARE_UNITS * weight) / total));
  let sum = units.reduce((a, b) => a + b, 0);
  for (let index = units.length - 1; sum > SHARE_UNITS && index >= 0; index--) {
    const take = Math.min(units[index]!, sum - SHARE_UNITS);
    units[index] = units[index]! - take;
    sum -= take;
  }
  return units;
}

/** B in requests; null for "unbounded". A single region is exact: B = 0 whatever the configuration says. */
export function resolveLeakageBudget(limit: number, budget: LeakageBudget, regions: number): number | null {
  if (regions <= 1) return 0;
  if (budget === 'unbounded') return null;
  if (typeof budget === 'number') return Math.min(budget, MAX_BUDGET);
  return Math.min(Math.floor((limit * Number(budget.slice(0, -1))) / 100), MAX_BUDGET);
}

/**
 * The leakage budget as the Lua scripts take it: B of resolveLeakageBudget (the rule's own budget, else the
 * federation's), or -1 for "unbounded" (plain gossip). The one place that encoding is written; every script
 * argument list takes the budget from here.
 */
export function scriptBudget(rule: Pick<Rule, 'limit' | 'leakageBudget'>, fallback: LeakageBudget, regions: number): number {
  return resolveLeakageBudget(rule.limit, rule.leakageBudget ?? fallback, regions) ?? -1;
}

/** floor(X·ω_r) in exact integer arithmetic. */
export function portion(amount: number, units: number): number {
  return Math.floor((amount * units) / SHARE_UNITS);
}

/** The id of the window (or token-bucket epoch) that contains the instant `ms`: floor(ms / P). */
export function windowIdAt(ms: number, periodMs: number): number {
  return Math.floor(ms / periodMs);
}

/** Recovery fence: 0 = no data loss ever detected; otherwise the local ms at which the loss was detected. */
export type Fence = number;

// Demand: what makes a region active, quiet, hungry or a free donor in one window (or epoch) slot, the signals
// every transfer decision of windows and token buckets reads under the REBALANCE policy.
// Lua mirror: lua/includes/rebalance.lua (active, quiet_span, quiet, stopped, free_donor, hungry, wanting).
import type { FederationParams, RebalancePolicy } from './params.ts';
import type { Slot } from './slots.ts';

/** Active: admitted something within idleMs of `now` (clocks differ by at most the skew; a heuristic). */
export function active(slot: Slot, d: number, now: number, policy: RebalancePolicy): boolean {
  return slot.t[d]! > 0 && now - slot.t[d]! <= policy.idleMs;
}

/**
 * Quiet: no admission in window (epoch) `slot.id` for the quiet span (idleMs/5, at most P/20) and for ten of its
 * own average gaps in it, so a region with steady low traffic is not mistaken for a free donor by one long gap.
 * (A peer stays "active", and so can be hungry, for the whole idleMs; a starved region's false denials refresh
 * its t, so a region waiting for a grant never looks quiet.)
 */
export const QUIET_GAPS = 10;
export function quiet(params: FederationParams, slot: Slot, d: number, now: number): boolean {
  if (slot.t[d]! <= 0) return true;
  const gaps = slot.c[d]! > 0 ? (QUIET_GAPS * (slot.t[d]! - slot.id * params.periodMs)) / slot.c[d]! : 0;
  return now - slot.t[d]! > Math.max(quietSpan(params), gaps);
}

/**
 * Stopped: d is not admitting in window (epoch) `slot.id` any more, the test every transfer decision reads of a
 * region that admitted there (who is hungry, whom a free donor gives to, when a holder returns). Traffic that began
 * in this window needs only the quiet span of silence: the average gap since the window's start says nothing about
 * a burst that started late in it (120 admissions begun 30 s into a minute would wait 2.5 s). Traffic carried over
 * from the previous window (`previous`) must be quiet() too, ten of its gaps, so that steady low traffic is not
 * taken for stopped by one long gap. Nothing admitted in the window: stopped.
 *
 * @example
 * ```ts
 * // A burst that began 30 s into the minute (nothing in the minute before), silent for longer than the quiet span.
 * stopped(params, slot, previous, 0, slot.t[0] + quietSpan(params) + 1); // true
 * ```
 */
export function stopped(params: FederationParams, slot: Slot, previous: Slot, d: number, now: number): boolean {
  if (slot.t[d]! <= 0) return true;
  if (previous.c[d]! > 0) return quiet(params, slot, d, now);
  return now - slot.t[d]! > quietSpan(params);
}

/**
 * A free donor gives (nearly) all it holds. It admitted in this window (epoch) and has stopped since (stopped()):
 * its traffic stopped or moved, so what it keeps for its own use is stranded. Or it admitted nothing in this window
 * yet and was quiet in the previous one (a region with steady traffic admits nothing yet at a window's start: the
 * previous window tells it apart from an idle one).
 */
export function freeDonor(params: FederationParams, slot: Slot, previous: Slot, r: number, now: number): boolean {
  if (slot.t[r]! <= 0) return quiet(params, previous, r, now);
  return stopped(params, slot, previous, r, now);
}

/** The least silence that makes a region quiet: idleMs/5, at most a twentieth of the period. */
export function quietSpan(params: FederationParams): number {
  return Math.min(params.rebalance.idleMs / 5, params.periodMs / 20);
}

/**
 * Hungry: active and not stopped, and used more than hungerFraction of its allowance, or denied while admitting
 * nothing: a region whose requests cost more than it holds admits nothing, yet its false denials stamp its t in the
 * slot (decideWindow / decideBucket), and t without a count is that demand.
 */
export function hungry(params: FederationParams, slot: Slot, previous: Slot, d: number, allowance: number, now: number): boolean {
  const used = slot.c[d]!;
  const demanding = used > 0 ? used > params.rebalance.hungerFraction * allowance : slot.t[d]! > 0;
  return demanding && active(slot, d, now, params.rebalance) && !stopped(params, slot, previous, d, now);
}

/**
 * Whom a region gives to: a hungry peer (`hungryPeer`: the algorithm's own hunger test, hungry() for windows,
 * bucketHungry for token buckets), and, when the region is a free donor, every peer admitting right now (not
 * stopped).
 */
export function wanting(
  params: FederationParams,
  slot: Slot,
  previous: Slot,
  d: number,
  now: number,
  free: boolean,
  hungryPeer: boolean,
): boolean {
  return hungryPeer || (free && !stopped(params, slot, previous, d, now));
}

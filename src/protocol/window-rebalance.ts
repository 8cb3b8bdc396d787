// The window algorithms' gossip side: merging a peer's view, the demand-following transfer that follows, the
// sweep that repeats it without new gossip, and what a region sends.
// Lua mirror: lua/includes/window_rebalance.lua (rebalance_window, merge_window, window_has_hungry_peer,
// sweep_window).
import { freeDonor, hungry, wanting } from './demand.ts';
import { windowIdAt, type Fence, type FederationParams } from './params.ts';
import {
  cloneWindowSlot,
  emptyWindowSlot,
  heldFrom,
  joinWindowSlots,
  kept,
  returnAmounts,
  sameWindowSlot,
  slotIndex,
  type MergeResult,
  type WindowSlot,
} from './slots.ts';
import { acknowledge, windowAllowance, windowBase, windowCells, windowForfeited, withSlot, type WindowState } from './window-decide.ts';

/**
 * Apply a peer's view (all its slots for this key) and then rebalance. Slots outside [cur−1, cur+1] are
 * ignored; a slot never replaces a newer window held in the same position.
 */
export function mergeWindow(
  params: FederationParams,
  state: WindowState,
  fence: Fence,
  now: number,
  incoming: readonly WindowSlot[],
): MergeResult<WindowState> {
  const current = windowIdAt(now, params.periodMs);
  const slots = state.slots.map(cloneWindowSlot);
  const changedIds: number[] = [];
  for (const slot of incoming) {
    if (slot.id < 0 || !kept(slot.id, current)) continue;
    const index = slotIndex(slot.id);
    const held = slots[index]!;
    if (held.id > slot.id) continue;
    const base = held.id === slot.id ? held : emptyWindowSlot(held.c.length, slot.id);
    const joined = joinWindowSlots(base, slot);
    acknowledge(joined, params.self);
    if (!sameWindowSlot(joined, held)) {
      slots[index] = joined;
      changedIds.push(slot.id);
    }
  }
  let next: WindowState = { slots };
  for (const id of changedIds.sort((a, b) => a - b)) {
    if (id <= current && !windowForfeited(params, fence, id)) next = rebalanceWindow(params, next, id, now);
  }
  return { state: changedIds.length > 0 ? next : state, changed: changedIds.length > 0 };
}

/**
 * Demand-following transfer in window `id` (call only for id ≤ the current window, outside a forfeited
 * window, never on the request path). Only unused allowance moves: afterwards c[r] ≤ l_r still holds.
 * - An active giver (admitted within idleMs in w or w−1) gives giveFraction of its surplus beyond a reserve
 *   (as much unused as it used) to its hungry peers.
 * - A free donor (quiet in w and w−1, see quiet()) gives its whole surplus beyond one request to its hungry and active
 *   peers at once; the one request lets it admit, look hungry and get allowance back if traffic comes to it.
 *   In the window's last tenth (at most idleMs) it keeps nothing: released to the hungry at window end.
 */
export function rebalanceWindow(params: FederationParams, state: WindowState, id: number, now: number): WindowState {
  if (params.budget === null || params.regions < 2) return state;
  const r = params.self;
  const policy = params.rebalance;
  if (state.slots[slotIndex(id)]!.id !== id) return state; // nothing was admitted or seen in w
  const slot = windowCells(state, id);
  const ownAllowance = windowAllowance(params, slot, r);
  // A free donor is not hungry, whatever its use says: its traffic stopped.
  const previous = windowCells(state, id - 1);
  const free = freeDonor(params, slot, previous, r, now);
  if (!free && hungry(params, slot, previous, r, ownAllowance, now)) return state;
  const targets: number[] = [];
  for (let d = 0; d < params.regions; d++) {
    if (d === r) continue;
    if (wanting(params, slot, previous, d, now, free, hungry(params, slot, previous, d, windowAllowance(params, slot, d), now)))
      targets.push(d);
  }
  const lastTenth = (id + 1) * params.periodMs - now <= Math.min(policy.idleMs, params.periodMs / 10);
  if (targets.length === 0) {
    // A free donor with nobody to give to hands back what it holds of its peers' allowance, as a token bucket does
    // (bucket-rebalance.ts): the burst that drew it has stopped, and the next burst may land in a donor. Its peers
    // read the same stopped() of it, so none of them gives it back.
    if (free) return returnWindowAllowance(params, state, id, ownAllowance - slot.c[r]! - (lastTenth ? 0 : 1));
    return state;
  }
  let reserve: number;
  if (free) reserve = lastTenth ? 0 : 1;
  else reserve = Math.max(Math.ceil(policy.reserveFraction * windowBase(params, r, id)), slot.c[r]!);
  const surplus = ownAllowance - slot.c[r]! - reserve;
  if (surplus < policy.minSurplus) return state;
  // At least one request each while the surplus covers it: small limits (10/min over 3 regions) would
  // otherwise strand most of an idle region's share behind the rounding.
  const fraction = free ? 1 : policy.giveFraction;
  const give = Math.max(Math.floor((surplus * fraction) / targets.length), surplus >= targets.length ? 1 : 0);
  if (give < 1) return state;
  const next = withSlot(state, id);
  const target = next.slots[slotIndex(id)]!;
  for (const d of targets) target.x[r]![d] = target.x[r]![d]! + give;
  return next;
}

/**
 * The return of a quiet free donor with nobody to give to: per peer d, what r holds of d's allowance in window
 * `id` (x[d][r] − x[r][d], when positive) goes back to d as a transfer, as far as `spare` (r's unused allowance
 * less what it keeps) covers it. Like any transfer it leaves c[r] ≤ l_r.
 */
function returnWindowAllowance(params: FederationParams, state: WindowState, id: number, spare: number): WindowState {
  const r = params.self;
  const amounts = returnAmounts(windowCells(state, id), r, spare, params.rebalance.minSurplus);
  if (amounts === undefined) return state;
  const next = withSlot(state, id);
  const target = next.slots[slotIndex(id)]!;
  for (let d = 0; d < params.regions; d++) if (amounts[d]! > 0) target.x[r]![d] = target.x[r]![d]! + amounts[d]!;
  return next;
}

/**
 * Does r hold allowance of a peer's in the current window (for the return, returnWindowAllowance), or does its
 * view show a hungry peer there that r could still give to? Then the key belongs in the sweep set. A region
 * whose unused allowance is below max(minSurplus, the hungry peers' count) can give nothing whatever its reserve
 * (rebalanceWindow gives at least one each only while the surplus covers every target), so sweeping it is wasted
 * work until a merge changes its state: a free donor that gave all it had is dropped.
 */
export function windowHasHungryPeer(params: FederationParams, state: WindowState, now: number): boolean {
  if (params.budget === null || params.regions < 2) return false;
  const r = params.self;
  const id = windowIdAt(now, params.periodMs);
  const slot = windowCells(state, id);
  const previous = windowCells(state, id - 1);
  let hungryPeers = 0;
  for (let d = 0; d < params.regions; d++) {
    if (d === r) continue;
    if (heldFrom(slot, r, d) > 0) return true;
    if (hungry(params, slot, previous, d, windowAllowance(params, slot, d), now)) hungryPeers++;
  }
  return hungryPeers > 0 && windowAllowance(params, slot, r) - slot.c[r]! >= Math.max(params.rebalance.minSurplus, hungryPeers);
}

/**
 * Rebalance the current window without new gossip. The sync loop runs it every interval for the keys whose
 * last merge showed a hungry peer: a starved peer's denials change nothing and send nothing, so without the
 * sweep a giver that went idle after the peer's last message would never notice it.
 */
export function sweepWindow(params: FederationParams, state: WindowState, fence: Fence, now: number): MergeResult<WindowState> {
  const id = windowIdAt(now, params.periodMs);
  if (windowForfeited(params, fence, id)) return { state, changed: false };
  const next = rebalanceWindow(params, state, id, now);
  return { state: next, changed: next !== state };
}

/** What a region sends for a window key: its whole view (every slot that holds a window). */
export function windowGossip(state: WindowState): WindowSlot[] {
  return state.slots.filter((slot) => slot.id >= 0).map(cloneWindowSlot);
}

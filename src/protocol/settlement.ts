// What a region writes after the fact, beside decide: a refund (an admission taken back: the identity of another
// shard denied the same request, or a rule with `countResponses` does not count the answer) and the local
// fallback's settlement (what it admitted while Redis was unreachable, written into the window it was admitted in).
// Both write only this region's own cells; neither reads the recovery fence.
// Lua mirror: lua/refund.lua (windows and token buckets), lua/settle_fallback.lua (windows only).
import type { BucketState } from './bucket-share.ts';
import { windowIdAt, type FederationParams } from './params.ts';
import { KEPT_WINDOWS, cloneEpochSlot, cloneWindowSlot, slotIndex, type EpochSlot, type WindowSlot } from './slots.ts';
import { acknowledge, withSlot, type WindowState } from './window-decide.ts';

/** What a refund leaves, and whether refund.lua counts the key as refunded. */
export interface RefundResult<S> {
  state: S;
  /** refund.lua's count for the key: a window key always, a token bucket only when it holds tokens. */
  refunded: boolean;
}

/**
 * Take back `cost` from this region's count c[self] of the window or epoch `now` falls in (decide's clock of the
 * admission), when the slot still holds it: c − cost when c > cost, 0 when c = cost, unchanged when c < cost (a
 * wipe or fence re-counted it lower). a and t stay: they never decrease. Peers that heard the higher count keep
 * it (max-merge), which errs on the safe side.
 */
function refundSlot<S extends WindowSlot | EpochSlot>(
  slots: readonly S[],
  self: number,
  id: number,
  cost: number,
  clone: (slot: S) => S,
): S[] {
  const index = slotIndex(id);
  const slot = slots[index]!;
  if (slot.id !== id || slot.c[self]! < cost) return slots as S[];
  const next = [...slots];
  const copy = clone(slot);
  copy.c[self] = copy.c[self]! - cost;
  next[index] = copy;
  return next;
}

/**
 * refund.lua on a window key (fixedWindow, slidingWindow): this region's count of the window `now` falls in,
 * less `cost` (refundSlot). Counted as refunded whether or not the window is still held.
 *
 * @example
 * ```ts
 * const admitted = decideWindow(params, newWindowState(2), 0, now, 3, false).state;
 * refundWindow(params, admitted, now, 3).state; // c[self] of the window back to 0
 * ```
 */
export function refundWindow(params: FederationParams, state: WindowState, now: number, cost: number): RefundResult<WindowState> {
  const id = windowIdAt(now, params.periodMs);
  const slots = refundSlot(state.slots, params.self, id, cost, cloneWindowSlot);
  return { state: slots === state.slots ? state : { slots }, refunded: true };
}

/**
 * refund.lua on a token bucket: `cost` tokens back at lastRefill (no refill first; the next refill clamps them
 * to the cap in force), and this region's demand count of the epoch `now` falls in less `cost` (refundSlot). A
 * key without tokens (none stored, or lost) is left alone and not counted.
 *
 * @example
 * ```ts
 * const admitted = decideBucket(params, undefined, 0, now, 2).state!;
 * refundBucket(params, admitted, now, 2).state!.tokens; // admitted.tokens + 2
 * ```
 */
export function refundBucket(
  params: FederationParams,
  state: BucketState | undefined,
  now: number,
  cost: number,
): RefundResult<BucketState | undefined> {
  if (state === undefined) return { state, refunded: false };
  const id = windowIdAt(now, params.periodMs);
  const slots = refundSlot(state.slots, params.self, id, cost, cloneEpochSlot);
  return { state: { ...state, tokens: state.tokens + cost, slots }, refunded: true };
}

/** What a settlement leaves, and whether settle_fallback.lua wrote the entry. */
export interface SettleResult {
  state: WindowState;
  written: boolean;
}

/**
 * settle_fallback.lua for one entry of a window key: `count` local-fallback admissions of the window starting at
 * `windowStart` (the gateway's clock), at Redis's clock `now`. A window after Redis's current one (a gateway clock
 * ahead) is counted in the current window at `now`; a window Redis no longer keeps (KEPT_WINDOWS or more
 * behind, or its slot holds a newer window) is skipped. Otherwise c[self] += count, t[self] raised to the
 * window's start (or `now`), and this region acknowledges what it sees, as an admission does, whatever the
 * allowance or the fence say: the requests were already admitted.
 *
 * @example
 * ```ts
 * settleWindow(params, state, now, windowIdAt(now, params.periodMs) * params.periodMs, 4).state; // c[self] + 4
 * ```
 */
export function settleWindow(params: FederationParams, state: WindowState, now: number, windowStart: number, count: number): SettleResult {
  const current = windowIdAt(now, params.periodMs);
  let id = windowIdAt(windowStart, params.periodMs);
  let start = windowStart;
  if (id > current) {
    id = current;
    start = now;
  }
  const held = state.slots[slotIndex(id)]!.id;
  if (id <= current - KEPT_WINDOWS || held > id) return { state, written: false };
  const next = withSlot(state, id);
  const slot = next.slots[slotIndex(id)]!;
  slot.c[params.self] = slot.c[params.self]! + count;
  slot.t[params.self] = Math.max(slot.t[params.self]!, start);
  acknowledge(slot, params.self);
  return { state: next, written: true };
}

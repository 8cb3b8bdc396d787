// The token bucket on the request path: a region's share σ of capacity and rate as its epoch slots and the
// recovery fence set it, the refill that integrates σ's exact path, the decision with the state it leaves, and
// the federation's remaining quota as the decision sees it.
// Lua mirror: lua/includes/bucket_share.lua (transfers_allowed, bucket_fence_end, share_at, refill, new_bucket,
// bucket_quota_remaining, decide_bucket).
import { SHARE_UNITS, portion, windowIdAt, type Fence, type FederationParams } from './params.ts';
import { KEPT_WINDOWS, cloneEpochSlot, emptyEpochSlot, netTransfer, slotIndex, sum, type EpochSlot } from './slots.ts';

/** A token bucket's state: its tokens at the last refill, and its epoch slots. */
export interface BucketState {
  /** Tokens at lastRefill (fractional). */
  tokens: number;
  lastRefill: number;
  /** σ in force at lastRefill (share units); informational, the refill integrates the exact σ path. */
  sig: number;
  /** KEPT_WINDOWS epoch slots. */
  slots: EpochSlot[];
}

function emptyEpochSlots(n: number): EpochSlot[] {
  return Array.from({ length: KEPT_WINDOWS }, () => emptyEpochSlot(n));
}

/** The cells of epoch `id`, zeros when the slot holds another epoch. Never mutate the result. */
export function epochCells(slots: readonly EpochSlot[], id: number): EpochSlot {
  const slot = slots[slotIndex(id)]!;
  return slot.id === id ? slot : emptyEpochSlot(slot.c.length, id);
}

/** b_r: the budget as extra capacity (never as rate). */
export function bucketBudget(params: FederationParams, r: number): number {
  return params.budget === null ? 0 : portion(params.budget, params.units[r]!);
}

/** Share moves need the sender to regain a share `skew` after the epoch, within the kept epochs. */
export function transfersAllowed(params: FederationParams): boolean {
  return params.budget !== null && params.regions > 1 && params.periodMs > params.maxClockSkewMs;
}

/**
 * End of the span in which a wiped region holds no share: the rest of the fence's epoch plus the skew (its
 * forgotten outgoing transfers are counted by receivers until then).
 */
export function bucketFenceEnd(params: FederationParams, fence: Fence): number {
  if (fence <= 0) return 0;
  return (windowIdAt(fence, params.periodMs) + 1) * params.periodMs + params.maxClockSkewMs;
}

/**
 * σ_r(t): the share in force at local time t for a view. Receivers count a transfer during its epoch only;
 * senders keep paying for it until `skew` after the epoch ended. A region may pass received share on, so in
 * that skew span (paying for what it passed on, no longer holding what it received) the sum can be negative:
 * σ is clamped at 0 (docs/federation.md §3 shows Σσ ≤ S still holds).
 */
export function shareAt(params: FederationParams, slots: readonly EpochSlot[], fence: Fence, t: number): number {
  if (params.budget === null) return SHARE_UNITS;
  if (t < bucketFenceEnd(params, fence)) return 0;
  const r = params.self;
  const epoch = windowIdAt(t, params.periodMs);
  let share = params.units[r]! + netTransfer(epochCells(slots, epoch), r);
  if (t - epoch * params.periodMs < params.maxClockSkewMs) share -= nettedGiven(epochCells(slots, epoch - 1), r);
  return Math.max(0, share);
}

/**
 * What r still pays in the skew span for an epoch: per peer, what it gave less what it saw that peer give it
 * back, never below 0 (Σ_d max(0, x[r][d] − x[d][r])). Per pair, what the receiver counts is at most what the
 * sender pays (docs/federation.md §3), so a share returned before the epoch ends is not paid twice.
 */
function nettedGiven(slot: EpochSlot, r: number): number {
  let total = 0;
  for (let d = 0; d < slot.c.length; d++) if (d !== r) total += Math.max(0, slot.x[r]![d]! - slot.x[d]![r]!);
  return total;
}

/** cap_r(σ) = C·σ/S + b_r. */
export function bucketCapacity(params: FederationParams, share: number): number {
  return (params.capacity * share) / SHARE_UNITS + bucketBudget(params, params.self);
}

/** rate_r(σ) = (L/P)·σ/S tokens per ms, evaluated as (L·σ)/(P·S). */
export function bucketRate(params: FederationParams, share: number): number {
  return (params.limit * share) / (params.periodMs * SHARE_UNITS);
}

/** The next instant after t at which σ can change for a fixed view: an epoch start, an epoch start + skew, the fence end. */
function nextShareChange(params: FederationParams, fence: Fence, t: number): number {
  const epochStart = windowIdAt(t, params.periodMs) * params.periodMs;
  let next = epochStart + params.periodMs;
  const skewEdge = epochStart + params.maxClockSkewMs;
  if (skewEdge > t && skewEdge < next) next = skewEdge;
  const fenceEnd = bucketFenceEnd(params, fence);
  if (fenceEnd > t && fenceEnd < next) next = fenceEnd;
  return next;
}

/** After this instant σ is constant for the view: no kept epoch and no fence can matter any more. */
function shareSettles(params: FederationParams, slots: readonly EpochSlot[], fence: Fence): number {
  let latest = -1;
  for (const slot of slots) latest = Math.max(latest, slot.id);
  return Math.max(bucketFenceEnd(params, fence), (latest + 2) * params.periodMs + params.maxClockSkewMs);
}

const MAX_REFILL_SEGMENTS = 32;

/**
 * Tokens at `now`: integrate the refill over the exact piecewise-constant σ path since lastRefill (the view is
 * unchanged in between: every change of it is an access that refills first), clamping to each segment's cap.
 */
export function refill(params: FederationParams, state: BucketState, fence: Fence, now: number): number {
  if (params.regions === 1) {
    // One region: σ = S throughout and no fence (decide.lua's single-region path keeps none), so one segment
    // (now − lastRefill)·rate, as the Lua computes it: summing per-epoch segments rounds differently.
    const capacity = bucketCapacity(params, SHARE_UNITS);
    if (now <= state.lastRefill) return Math.min(state.tokens, capacity);
    return Math.min(capacity, state.tokens + (now - state.lastRefill) * bucketRate(params, SHARE_UNITS));
  }
  let tokens = state.tokens;
  let t = state.lastRefill;
  if (now <= t) return Math.min(tokens, bucketCapacity(params, shareAt(params, state.slots, fence, now)));
  const settles = shareSettles(params, state.slots, fence);
  for (let segment = 0; segment < MAX_REFILL_SEGMENTS && t < now && t < settles; segment++) {
    const end = Math.min(now, nextShareChange(params, fence, t));
    const share = shareAt(params, state.slots, fence, t);
    tokens = Math.min(bucketCapacity(params, share), tokens + (end - t) * bucketRate(params, share));
    t = end;
  }
  const share = shareAt(params, state.slots, fence, now);
  if (t < now && t >= settles) {
    // σ is constant from here on.
    tokens = Math.min(bucketCapacity(params, share), tokens + (now - t) * bucketRate(params, share));
  }
  // Segment limit hit before σ settled (cannot happen for states this module writes): credit nothing more.
  return Math.min(tokens, bucketCapacity(params, share));
}

/**
 * A bucket this region has no state for. Without a fence it starts full. After a data loss it starts as if
 * emptied at the fence and refilled since (at σ = 0 during the forfeited span).
 */
export function newBucket(params: FederationParams, fence: Fence, now: number): BucketState {
  const slots = emptyEpochSlots(params.regions);
  if (fence > 0 && fence <= now) {
    const empty: BucketState = { tokens: 0, lastRefill: fence, sig: 0, slots };
    return { tokens: refill(params, empty, fence, now), lastRefill: now, sig: shareAt(params, slots, fence, now), slots };
  }
  const share = shareAt(params, slots, fence, now);
  return { tokens: bucketCapacity(params, share), lastRefill: now, sig: share, slots };
}

/** What decideBucket answers for one request. */
export interface BucketDecision {
  allowed: boolean;
  /** Tokens left (after this request when allowed). */
  remaining: number;
  /** The federation's remaining quota as this region's view has it, after this request (bucketQuotaRemaining). */
  quotaRemaining: number;
  /**
   * A false denial (docs/federation.md §4): federated, outside a fence's zero-share span, denied for lack of
   * this region's tokens although its view shows the federation below what one global bucket holds: at
   * least min(C, L) less the previous epoch's use when the epoch began, plus the refill since:
   * Σ_o c_e[o] + cost ≤ max(0, min(C, L) − Σ_o c_{e−1}[o]) + L·(now − eP)/P, while some peer holds share in the
   * epoch (a region holding every share unit has nothing to ask for). Always false when allowed.
   */
  falseDenial: boolean;
  /**
   * The new state; the very same object (possibly undefined) when truly denied. A false denial of a stored
   * bucket refreshes this region's t in the epoch (demand), nothing else.
   */
  state: BucketState | undefined;
}

/** Decide one request of `cost` at `now` for a token bucket: refill, then admit while the tokens cover it. */
export function decideBucket(
  params: FederationParams,
  state: BucketState | undefined,
  fence: Fence,
  now: number,
  cost: number,
): BucketDecision {
  const current = state ?? newBucket(params, fence, now);
  const tokens = refill(params, current, fence, now);
  const epoch = windowIdAt(now, params.periodMs);
  if (tokens < cost) {
    const falseDenial = bucketFalseDenial(params, current, fence, now, cost);
    const quotaRemaining = bucketQuotaRemaining(params, current, fence, now, tokens, 0);
    if (!falseDenial || state === undefined) return { allowed: false, remaining: tokens, quotaRemaining, falseDenial, state };
    // Demand, as for windows: t[r] refreshed in the epoch's slot. The bucket is refilled to now first, as an
    // admission does: the slot the epoch takes may hold an older epoch that the refill since lastRefill still
    // integrates, and integrating that past with the slot replaced would count it at another share.
    const touched = withEpochSlot(state.slots, epoch);
    const cells = touched[slotIndex(epoch)]!;
    cells.t[params.self] = Math.max(cells.t[params.self]!, now);
    const refilled = { tokens, lastRefill: now, sig: shareAt(params, touched, fence, now), slots: touched };
    return { allowed: false, remaining: tokens, quotaRemaining, falseDenial, state: refilled };
  }
  const quotaRemaining = bucketQuotaRemaining(params, current, fence, now, tokens - cost, cost);
  const slots = withEpochSlot(current.slots, epoch);
  const slot = slots[slotIndex(epoch)]!;
  slot.c[params.self] = slot.c[params.self]! + cost;
  slot.t[params.self] = Math.max(slot.t[params.self]!, now);
  return {
    allowed: true,
    remaining: tokens - cost,
    quotaRemaining,
    falseDenial: false,
    state: { tokens: tokens - cost, lastRefill: now, sig: shareAt(params, slots, fence, now), slots },
  };
}

/** σ_d from a view without the skew term: the share d holds for the epoch as far as this region knows. */
export function viewShare(params: FederationParams, slot: EpochSlot, d: number): number {
  return params.units[d]! + netTransfer(slot, d);
}

/**
 * Does a peer hold share in this epoch, as the view has it (viewShare)? A grant moves share (with the tokens it
 * carries), so a peer without share has nothing it could give.
 */
function peersHoldShare(params: FederationParams, slot: EpochSlot): boolean {
  for (let d = 0; d < params.regions; d++) if (d !== params.self && viewShare(params, slot, d) > 0) return true;
  return false;
}

/**
 * decideBucket's false denial test for a denied request (BucketDecision.falseDenial). Never while this region holds
 * every share unit of the epoch in its view: then the federation's room is this bucket's own refill, no peer has
 * anything to grant, and the denial is the one global bucket's (a hot key whose traffic is all here would otherwise
 * count every denial false and call on its peers for nothing).
 */
function bucketFalseDenial(params: FederationParams, bucket: BucketState, fence: Fence, now: number, cost: number): boolean {
  if (params.regions === 1 || now < bucketFenceEnd(params, fence)) return false;
  const epoch = windowIdAt(now, params.periodMs);
  const current = epochCells(bucket.slots, epoch);
  if (!peersHoldShare(params, current)) return false;
  const used = sum(current.c);
  // The global bucket held at least min(C, L) less the previous epoch's use when this epoch began (§4).
  const carried = Math.max(0, Math.min(params.capacity, params.limit) - sum(epochCells(bucket.slots, epoch - 1).c));
  return used + cost <= carried + (params.limit * (now - epoch * params.periodMs)) / params.periodMs;
}

/**
 * What one global bucket (capacity C, refill L per P) surely holds at `now` for the counts of `bucket`'s view:
 * the previous epoch refilled at least min(C, L) less its use, so the epoch began with
 * carried = max(0, min(C, L) − Σ_o c_{e−1}[o]), and it refilled L·(now − eP)/P since, up to C.
 */
function globalBucketHeld(params: FederationParams, bucket: BucketState, now: number): number {
  const epoch = windowIdAt(now, params.periodMs);
  const carried = Math.max(0, Math.min(params.capacity, params.limit) - sum(epochCells(bucket.slots, epoch - 1).c));
  return Math.min(params.capacity, carried + (params.limit * (now - epoch * params.periodMs)) / params.periodMs);
}

/**
 * The federation's remaining quota of a token bucket as region r's view has it, after a decision, in whole
 * tokens:
 *
 *   quota = ⌊max(0, remaining)⌋                                        one region (exact), or inside the
 *                                                                      fence's zero-share span (the view is
 *                                                                      wiped: r's own tokens only)
 *         = max(⌊max(0, remaining)⌋, min(C, max(0, ⌊held − used⌋)))   otherwise,
 *
 * with `held` = min(C, carried + L·(now − eP)/P) (what one global bucket surely holds, as the false-denial test
 * reckons it: carried = max(0, min(C, L) − Σ_o c_{e−1}[o])), `used` = Σ_o c_e[o] + admitted (the epoch's use
 * in the view, this request's cost included when admitted) and `remaining` r's own tokens after the request.
 * `bucket` is the state the decision started from (before the admission).
 *
 * Given the view it is a lower bound of what one exact global bucket would hold: the refill before the epoch
 * and within it is counted at its least (a bucket that was full, or had refilled L, by the epoch's start), and
 * every admission of the view is taken off. Against the truth it is off by sync lag only (views never exceed
 * the truth: admissions not yet gossiped to r make it too high until they arrive). It is never below what r
 * itself can admit now (the max), and a region's own tokens may exceed C only by its part of the budget.
 *
 * @example
 * ```ts
 * // A fresh 1,000-token bucket in a three-region federation: after one admission, 999 (r holds ≈ 333).
 * decideBucket(params, undefined, 0, now, 1).quotaRemaining; // 999
 * ```
 */
export function bucketQuotaRemaining(
  params: FederationParams,
  bucket: BucketState,
  fence: Fence,
  now: number,
  remaining: number,
  admitted: number,
): number {
  const own = Math.max(0, Math.floor(remaining));
  if (params.regions === 1 || now < bucketFenceEnd(params, fence)) return own;
  const used = sum(epochCells(bucket.slots, windowIdAt(now, params.periodMs)).c) + admitted;
  return Math.max(own, Math.min(params.capacity, Math.max(0, Math.floor(globalBucketHeld(params, bucket, now) - used))));
}

/** A copy of `slots` in which slot `id` exists (reset if it held an older epoch). */
export function withEpochSlot(slots: readonly EpochSlot[], id: number): EpochSlot[] {
  const next = slots.map(cloneEpochSlot);
  const index = slotIndex(id);
  if (next[index]!.id !== id) next[index] = emptyEpochSlot(next[index]!.c.length, id);
  return next;
}

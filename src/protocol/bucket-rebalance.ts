// The token bucket's gossip side: merging a peer's epoch slots, the demand-following share transfer (and the
// end-of-epoch return of received share), the sweep that repeats it without new gossip, and what a region sends.
// Lua mirror: lua/includes/bucket_rebalance.lua (bucket_hungry, returning, held_from,
// return_bucket_share, rebalance_bucket, tokens_received, bucket_has_hungry_peer, merge_bucket, sweep_bucket;
// bucket_sweep_idle, which sweep_watch.lua calls).
import {
  bucketCapacity,
  bucketFenceEnd,
  epochCells,
  newBucket,
  refill,
  shareAt,
  transfersAllowed,
  viewShare,
  withEpochSlot,
  type BucketState,
} from './bucket-share.ts';
import { active, freeDonor, hungry, quietSpan, stopped, wanting } from './demand.ts';
import { SHARE_UNITS, windowIdAt, type Fence, type FederationParams } from './params.ts';
import {
  cloneEpochSlot,
  emptyEpochSlot,
  heldFrom,
  joinEpochSlots,
  kept,
  returnAmounts,
  sameEpochSlot,
  slotIndex,
  type EpochSlot,
  type MergeResult,
} from './slots.ts';

/**
 * Apply a peer's epoch slots: refill first (old view), join, credit the tokens newly moved to this region in
 * the current epoch (Σ_o y[o][r] grew), rebalance the current epoch, then clamp the tokens to the cap of the
 * new σ. Tokens are credited only in the current epoch and never before the fence end: a transfer of another
 * epoch is not counted in σ, and after a wipe the cumulative y of a forfeited epoch would be credited twice.
 * Unbounded mode instead charges the bucket for the peers' newly seen consumption.
 */
export function mergeBucket(
  params: FederationParams,
  state: BucketState | undefined,
  fence: Fence,
  now: number,
  incoming: readonly EpochSlot[],
): MergeResult<BucketState | undefined> {
  const current = state ?? newBucket(params, fence, now);
  const epoch = windowIdAt(now, params.periodMs);
  let slots = current.slots.map(cloneEpochSlot);
  const changedIds: number[] = [];
  let charged = 0;
  for (const slot of incoming) {
    if (slot.id < 0 || !kept(slot.id, epoch)) continue;
    const index = slotIndex(slot.id);
    const held = slots[index]!;
    if (held.id > slot.id) continue;
    const base = held.id === slot.id ? held : emptyEpochSlot(held.c.length, slot.id);
    const joined = joinEpochSlots(base, slot);
    if (!sameEpochSlot(joined, held)) {
      for (let o = 0; o < joined.c.length; o++) if (o !== params.self) charged += joined.c[o]! - base.c[o]!;
      slots[index] = joined;
      changedIds.push(slot.id);
    }
  }
  if (changedIds.length === 0) return { state, changed: false };
  let tokens = refill(params, current, fence, now);
  if (params.budget === null) tokens = Math.max(0, tokens - charged);
  if (changedIds.includes(epoch) && transfersAllowed(params) && now >= bucketFenceEnd(params, fence)) {
    tokens += tokensReceived(epochCells(slots, epoch), params.self) - tokensReceived(epochCells(current.slots, epoch), params.self);
    const rebalanced = rebalanceBucket(params, slots, fence, now, tokens);
    slots = rebalanced.slots;
    tokens = rebalanced.tokens;
  }
  const share = shareAt(params, slots, fence, now);
  tokens = Math.min(tokens, bucketCapacity(params, share));
  return { state: { tokens, lastRefill: now, sig: share, slots }, changed: true };
}

/** Σ_{o≠r} y[o][r]: the tokens moved to r in one epoch slot. */
function tokensReceived(slot: EpochSlot, r: number): number {
  let total = 0;
  for (let o = 0; o < slot.c.length; o++) if (o !== r) total += slot.y[o]![r]!;
  return total;
}

/**
 * A bucket region is hungry when it admitted more than hungerFraction of what its share refilled so far in the
 * epoch (paced), or when it is admitting while holding less than hungerFraction of its base share: a region
 * that gave its share away and gets traffic again shows little paced use over a long epoch, yet needs share now.
 */
function bucketHungry(params: FederationParams, slot: EpochSlot, previous: EpochSlot, d: number, elapsed: number, now: number): boolean {
  const share = viewShare(params, slot, d);
  const paced = (params.limit * share * elapsed) / (params.periodMs * SHARE_UNITS);
  if (hungry(params, slot, previous, d, paced, now)) return true;
  return share < params.rebalance.hungerFraction * params.units[d]! && wantsShare(params, slot, previous, d, now);
}

/** Admitting (c > 0, active, not stopped), whatever its allowance. */
function wantsShare(params: FederationParams, slot: EpochSlot, previous: EpochSlot, d: number, now: number): boolean {
  return slot.c[d]! > 0 && active(slot, d, now, params.rebalance) && !stopped(params, slot, previous, d, now);
}

/**
 * Demand-following share transfer in the current epoch (the caller refills first and clamps after).
 * Demand is paced: d is hungry when it admitted more than hungerFraction of what its share refilled so far in
 * the epoch (a drained bucket admits exactly its refill, so "half the epoch's allowance" would never trigger).
 * A giver gives from its whole σ (received share included, so rights follow traffic from region to region)
 * and moves its tokens with it: Δy = min(τ·Δσ/σ, C·Δσ/S, (τ − min(τ, 1))/|targets|) per peer, so neither side
 * holds more than its new cap, the tokens in flight never exceed C·(share in flight)/S, and the giver keeps one
 * token to show demand with. An active giver keeps the share its own
 * pace needs to stay out of hunger, and at least what sustained it in the previous epoch; a free donor (idle
 * in this epoch and the previous one) gives all of it to its hungry and active peers.
 */
export function rebalanceBucket(
  params: FederationParams,
  slots: readonly EpochSlot[],
  fence: Fence,
  now: number,
  tokens: number,
): { slots: EpochSlot[]; tokens: number } {
  const unchanged = { slots: [...slots], tokens };
  if (!transfersAllowed(params)) return unchanged;
  const r = params.self;
  const policy = params.rebalance;
  const epoch = windowIdAt(now, params.periodMs);
  const elapsed = Math.max(1, now - epoch * params.periodMs);
  const slot = epochCells(slots, epoch);
  if (returning(params, now)) return returnBucketShare(params, slots, fence, now, tokens);
  const previousSlot = epochCells(slots, epoch - 1);
  const free = freeDonor(params, slot, previousSlot, r, now);
  // Fair shares under overload: when every region is busy, pace and the previous epoch can each claim more than
  // the whole, and a hungry giver gives nothing; yet toward a hungry peer holding less than its base share, a
  // giver above its own base yields down to that base, hungry or not.
  const selfHungry = !free && bucketHungry(params, slot, previousSlot, r, elapsed, now);
  const targets: number[] = [];
  for (let d = 0; d < params.regions; d++) {
    if (d === r || !wanting(params, slot, previousSlot, d, now, free, bucketHungry(params, slot, previousSlot, d, elapsed, now))) continue;
    if (!selfHungry || viewShare(params, slot, d) < params.units[d]!) targets.push(d);
  }
  if (targets.length === 0) {
    // A free donor with nobody to give to sends back what it holds of its peers' share, with its tokens, as at the
    // end of the epoch: the burst that drew it has stopped, and the next burst may land in a donor. Its peers read
    // the same stopped() of it, so none of them gives it back (a free donor that admitted here is stopped).
    if (free && heldAny(slot, r)) return returnBucketShare(params, slots, fence, now, tokens);
    return unchanged;
  }
  let reserve = 0;
  if (!free) {
    const pace = (SHARE_UNITS * slot.c[r]! * params.periodMs) / (policy.hungerFraction * params.limit * elapsed);
    const previous = (SHARE_UNITS * previousSlot.c[r]!) / params.limit;
    reserve = Math.max(policy.reserveFraction * params.units[r]!, pace, previous);
    if (targets.some((d) => viewShare(params, slot, d) < params.units[d]!)) reserve = Math.min(reserve, params.units[r]!);
  }
  const share = shareAt(params, slots, fence, now);
  const surplus = share - reserve;
  if (surplus < policy.minSurplus) return unchanged;
  const give = Math.floor((surplus * (free ? 1 : policy.giveFraction)) / targets.length);
  if (give < 1) return unchanged;
  // The giver keeps one token (or what it has): a region left with no share and no token could not admit, so
  // it could never show the demand that brings rights back.
  const spare = (tokens - Math.min(tokens, 1)) / targets.length;
  const moved = Math.min((tokens * give) / share, (params.capacity * give) / SHARE_UNITS, spare);
  const next = withEpochSlot(slots, epoch);
  const target = next[slotIndex(epoch)]!;
  let left = tokens;
  for (const d of targets) {
    target.x[r]![d] = target.x[r]![d]! + give;
    target.y[r]![d] = target.y[r]![d]! + moved;
    left -= moved;
  }
  return { slots: next, tokens: left };
}

/**
 * The end of an epoch: received share goes back to the peers it came from (per peer, what r holds of theirs,
 * as far as its σ covers it), with its tokens, and nobody gives anything else. Share lasts one epoch anyway;
 * returned before the end, the donors' netted skew-span payment is 0, so their σ is u_d across the boundary
 * and the tokens they got back survive it instead of being clamped away at the holder (§3, §4).
 */
function returnBucketShare(
  params: FederationParams,
  slots: readonly EpochSlot[],
  fence: Fence,
  now: number,
  tokens: number,
): { slots: EpochSlot[]; tokens: number } {
  const r = params.self;
  const epoch = windowIdAt(now, params.periodMs);
  const slot = epochCells(slots, epoch);
  const share = shareAt(params, slots, fence, now);
  const amounts = returnAmounts(slot, r, share, params.rebalance.minSurplus);
  if (amounts === undefined) return { slots: [...slots], tokens };
  const keep = Math.min(tokens, 1);
  const next = withEpochSlot(slots, epoch);
  const target = next[slotIndex(epoch)]!;
  let remaining = tokens;
  for (let d = 0; d < params.regions; d++) {
    const amount = amounts[d]!;
    if (amount <= 0) continue;
    const moved = Math.min(((tokens - keep) * amount) / share, (params.capacity * amount) / SHARE_UNITS);
    target.x[r]![d] = target.x[r]![d]! + amount;
    target.y[r]![d] = target.y[r]![d]! + moved;
    remaining -= moved;
  }
  return { slots: next, tokens: remaining };
}

/** Where the end-of-epoch span of `now`'s epoch begins: its last min(P/10, idleMs/5) ms. */
function returningFrom(params: FederationParams, now: number): number {
  const end = (windowIdAt(now, params.periodMs) + 1) * params.periodMs;
  return end - Math.min(params.periodMs / 10, params.rebalance.idleMs / 5);
}

/** Whether `now` is in the end-of-epoch span of a bucket (received share goes back home). */
function returning(params: FederationParams, now: number): boolean {
  return now >= returningFrom(params, now);
}

/** Does r hold share of any peer's (heldFrom > 0)? */
function heldAny(slot: EpochSlot, r: number): boolean {
  for (let d = 0; d < slot.c.length; d++) if (d !== r && heldFrom(slot, r, d) > 0) return true;
  return false;
}

/**
 * Does r's bucket need the sweep: share it holds of a peer's (for the returns: the end of the epoch, or r falling
 * quiet), or a hungry peer in its view of the current epoch that r could still give to? r gives nothing while its
 * share in view (at least what it gives from) is below max(minSurplus, the hungry peers' count): every target gets
 * floor(surplus/targets) and the targets include the hungry. A free donor that gave its share away is so dropped
 * until a merge changes its state (a return, or demand in the next epoch, which comes on the fast lane).
 */
export function bucketHasHungryPeer(params: FederationParams, state: BucketState, now: number): boolean {
  if (!transfersAllowed(params)) return false;
  const r = params.self;
  const epoch = windowIdAt(now, params.periodMs);
  const elapsed = Math.max(1, now - epoch * params.periodMs);
  const slot = epochCells(state.slots, epoch);
  const previous = epochCells(state.slots, epoch - 1);
  let hungryPeers = 0;
  for (let d = 0; d < params.regions; d++) {
    if (d === r) continue;
    if (heldFrom(slot, r, d) > 0) return true;
    if (bucketHungry(params, slot, previous, d, elapsed, now)) hungryPeers++;
  }
  return hungryPeers > 0 && viewShare(params, slot, r) >= Math.max(params.rebalance.minSurplus, hungryPeers);
}

/**
 * A sweep of r's bucket that can change nothing and leaves it watched, told from a few cells of the current epoch
 * (what sweep_watch.lua reads before it would load the key whole): r holds a peer's share (so
 * `bucketHasHungryPeer` keeps it watched), admitted within the quiet span (so it is no free donor), no peer
 * admitted within idleMs (so none is hungry, wants share or is a free donor's target), and the epoch's returning
 * span has not begun. An active region that holds its idle peers' share, as a hot key's region does, is swept
 * every round for the return that comes only once it falls quiet or the epoch ends; this is that case.
 *
 * @example
 * ```ts
 * // r = 0 admitted 100 ms ago and holds 5 units of region 1's share; the peers have not admitted this epoch.
 * bucketSweepIdle(params, state, now); // true: sweepBucket(params, state, fence, now).changed is false
 * ```
 */
export function bucketSweepIdle(params: FederationParams, state: BucketState | undefined, now: number): boolean {
  if (state === undefined || !transfersAllowed(params) || returning(params, now)) return false;
  const r = params.self;
  const slot = state.slots.find((held) => held.id === windowIdAt(now, params.periodMs));
  if (slot === undefined || !heldAny(slot, r)) return false;
  if (!(slot.t[r]! > 0 && now - slot.t[r]! <= quietSpan(params))) return false;
  for (let d = 0; d < params.regions; d++) {
    if (d !== r && slot.t[d]! > 0 && now - slot.t[d]! <= params.rebalance.idleMs) return false;
  }
  return true;
}

/**
 * Until when `bucketSweepIdle` holds for this state (every t with now <= t < the answer; the answer may be now
 * itself), or undefined where it does not hold at `now`: until r's last admission is a quiet span old or the epoch's returning span begins, whichever is
 * first. Only a change of the state ends it sooner: a peer's admission or a transfer arrives by a merge (which rings
 * the watch lane of the key's shard), and r's own admissions only move its last admission later. The watch loop
 * leaves such a shard unswept until then (src/federation/gossip/watch-sweep.ts): each sweep it skips would change
 * nothing.
 *
 * @example
 * ```ts
 * // r admitted 100 ms ago (quiet span 1 s), mid-epoch: idle for 900 ms more.
 * bucketSweepIdleUntil(params, state, now); // now + 900
 * ```
 */
export function bucketSweepIdleUntil(params: FederationParams, state: BucketState | undefined, now: number): number | undefined {
  if (!bucketSweepIdle(params, state, now)) return undefined;
  const slot = state!.slots.find((held) => held.id === windowIdAt(now, params.periodMs))!;
  return Math.min(slot.t[params.self]! + quietSpan(params), returningFrom(params, now));
}

/** The token-bucket sweep: refill, rebalance the current epoch, clamp (see sweepWindow). */
export function sweepBucket(params: FederationParams, state: BucketState, fence: Fence, now: number): MergeResult<BucketState> {
  if (!transfersAllowed(params) || now < bucketFenceEnd(params, fence)) return { state, changed: false };
  const { slots, tokens } = rebalanceBucket(params, state.slots, fence, now, refill(params, state, fence, now));
  if (slots.every((slot, index) => sameEpochSlot(slot, state.slots[index]!))) return { state, changed: false };
  const share = shareAt(params, slots, fence, now);
  return { state: { tokens: Math.min(tokens, bucketCapacity(params, share)), lastRefill: now, sig: share, slots }, changed: true };
}

/** What a region sends for a token-bucket key: its epoch slots that hold an epoch (never its tokens). */
export function bucketGossip(state: BucketState): EpochSlot[] {
  return state.slots.filter((slot) => slot.id >= 0).map(cloneEpochSlot);
}

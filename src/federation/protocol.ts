// The federation protocol as pure functions: the specification that lua/*.lua mirrors (a differential test
// compares them) and that the simulation drives. Full argument: docs/federation.md.
//
// Numeric contract with the Lua mirror: every value here is an IEEE double, and every expression that mixes
// products and quotients is written in one fixed order (the Lua evaluates the same order), so both sides
// compute bit-identical results. Integer quantities (counts, share units, transfers) stay below 2^53.
import type { LeakageBudget } from '../config/schema.ts';

/** Share units: a region's weight, a token-bucket share and every "X·ω" product are expressed in 1/S. */
export const SHARE_UNITS = 1_000_000;

/** Window (or epoch) slots kept per key: the previous, the current and one early window (a peer ahead). */
export const KEPT_WINDOWS = 3;

/**
 * Demand-following transfer policy. Passed to the Lua as arguments, so every tunable lives here.
 * - hungerFraction: a region is hungry once it used more than this fraction of its allowance.
 * - reserveFraction: a giver always keeps this fraction of its base share unused (plus what it has used).
 * - giveFraction: the fraction of its surplus a giver hands out per rebalance, split over the hungry peers.
 * - minSurplus: no transfer below this surplus (requests, or share units for token buckets).
 * - idleMs: a region that admitted nothing for this long (by its last admission time in the view) is idle:
 *   it is never hungry and keeps no reserve for its past use, so allowance follows traffic that moves. A
 *   region quiet (no admission for idleMs/5 and ten of its average gaps) in this window (epoch) and the
 *   previous one is a free donor: it gives everything but one request (nothing for buckets, nothing in the
 *   last tenth of a window) to its hungry and active peers.
 */
export const REBALANCE = {
  hungerFraction: 0.5,
  reserveFraction: 0.02,
  giveFraction: 0.5,
  minSurplus: 1,
  idleMs: 5_000,
} as const;

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
    budget: resolveBudget(input.limit, input.leakageBudget, input.regions),
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
export function resolveBudget(limit: number, budget: LeakageBudget, regions: number): number | null {
  if (regions <= 1) return 0;
  if (budget === 'unbounded') return null;
  if (typeof budget === 'number') return Math.min(budget, MAX_BUDGET);
  return Math.min(Math.floor((limit * Number(budget.slice(0, -1))) / 100), MAX_BUDGET);
}

/** floor(X·ω_r) in exact integer arithmetic. */
export function portion(amount: number, units: number): number {
  return Math.floor((amount * units) / SHARE_UNITS);
}

export function windowIdAt(ms: number, periodMs: number): number {
  return Math.floor(ms / periodMs);
}

/** Recovery fence: 0 = no data loss ever detected; otherwise the local ms at which the loss was detected. */
export type Fence = number;

// ---------------------------------------------------------------------------------------------------------
// Views: per window (or epoch) id, a matrix of max-merged cells. Slot k of a key holds the id ≡ k (mod 3);
// a slot holding another id reads as zeros (`id: -1` is an empty slot).

export interface WindowSlot {
  id: number;
  /** c[o]: requests admitted by region o in this window. */
  c: number[];
  /** x[o][d]: allowance region o transferred to region d in this window (cumulative). */
  x: number[][];
  /** a[o][d]: region o's acknowledged view of c[d]. */
  a: number[][];
  /** t[o]: region o's clock at its last admission in this window (0 = none); the demand recency signal. */
  t: number[];
}

export interface EpochSlot {
  id: number;
  /** c[o]: cost admitted by region o in this epoch (the demand signal). */
  c: number[];
  /** x[o][d]: share units region o transferred to region d in this epoch. */
  x: number[][];
  /** y[o][d]: tokens region o moved to region d with those units in this epoch (cumulative, fractional). */
  y: number[][];
  /** t[o]: region o's clock at its last admission in this epoch (0 = none). */
  t: number[];
}

export type Slot = WindowSlot | EpochSlot;

function zeros(n: number): number[] {
  return new Array<number>(n).fill(0);
}

function matrix(n: number): number[][] {
  return Array.from({ length: n }, () => zeros(n));
}

export function emptyWindowSlot(n: number, id = -1): WindowSlot {
  return { id, c: zeros(n), x: matrix(n), a: matrix(n), t: zeros(n) };
}

export function emptyEpochSlot(n: number, id = -1): EpochSlot {
  return { id, c: zeros(n), x: matrix(n), y: matrix(n), t: zeros(n) };
}

function cloneWindowSlot(slot: WindowSlot): WindowSlot {
  return { id: slot.id, c: [...slot.c], x: slot.x.map((row) => [...row]), a: slot.a.map((row) => [...row]), t: [...slot.t] };
}

function cloneEpochSlot(slot: EpochSlot): EpochSlot {
  return { id: slot.id, c: [...slot.c], x: slot.x.map((row) => [...row]), y: slot.y.map((row) => [...row]), t: [...slot.t] };
}

function slotIndex(id: number): number {
  return ((id % KEPT_WINDOWS) + KEPT_WINDOWS) % KEPT_WINDOWS;
}

/** Cellwise max of two slots with the same id. Idempotent, commutative, associative (a join). */
export function joinWindowSlots(left: WindowSlot, right: WindowSlot): WindowSlot {
  if (left.id !== right.id) throw new Error('joining slots of different windows');
  return {
    id: left.id,
    c: left.c.map((value, o) => Math.max(value, right.c[o]!)),
    x: left.x.map((row, o) => row.map((value, d) => Math.max(value, right.x[o]![d]!))),
    a: left.a.map((row, o) => row.map((value, d) => Math.max(value, right.a[o]![d]!))),
    t: left.t.map((value, o) => Math.max(value, right.t[o]!)),
  };
}

export function joinEpochSlots(left: EpochSlot, right: EpochSlot): EpochSlot {
  if (left.id !== right.id) throw new Error('joining slots of different epochs');
  return {
    id: left.id,
    c: left.c.map((value, o) => Math.max(value, right.c[o]!)),
    x: left.x.map((row, o) => row.map((value, d) => Math.max(value, right.x[o]![d]!))),
    y: left.y.map((row, o) => row.map((value, d) => Math.max(value, right.y[o]![d]!))),
    t: left.t.map((value, o) => Math.max(value, right.t[o]!)),
  };
}

function sum(values: readonly number[]): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}

/** Σ_{o≠d} x[o][d] − Σ_{o≠d} x[d][o]: what d received minus what it gave, in one slot. */
function netTransfer(slot: EpochSlot | WindowSlot, d: number): number {
  let net = 0;
  for (let o = 0; o < slot.c.length; o++) {
    if (o === d) continue;
    net += slot.x[o]![d]! - slot.x[d]![o]!;
  }
  return net;
}

// ---------------------------------------------------------------------------------------------------------
// Window algorithms (fixedWindow, slidingWindow)

export interface WindowState {
  /** KEPT_WINDOWS slots; slot k holds a window id ≡ k (mod 3) or -1. */
  slots: WindowSlot[];
}

export function newWindowState(n: number): WindowState {
  return { slots: Array.from({ length: KEPT_WINDOWS }, () => emptyWindowSlot(n)) };
}

/** The cells of window `id`, zeros when the slot holds another window. Never mutate the result. */
export function windowCells(state: WindowState, id: number): WindowSlot {
  const slot = state.slots[slotIndex(id)]!;
  return slot.id === id ? slot : emptyWindowSlot(slot.c.length, id);
}

/**
 * base_d(w) = floor((L+B)·ω_d) plus d's part of the remainder R = (L+B) − Σ_o floor((L+B)·ω_o): every region
 * gets floor(R/N), and R mod N regions one more, rotating with the window id. Every region computes the same
 * split from the config, and Σ_d base_d = L + B exactly (floor per region would lose up to N−1 requests: 9 of
 * 10 for /checkout). Unbounded mode has no local limit (Infinity).
 */
export function windowBase(params: FederationParams, d: number, id = 0): number {
  if (params.budget === null) return Infinity;
  const total = params.limit + params.budget;
  let floors = 0;
  for (let o = 0; o < params.regions; o++) floors += portion(total, params.units[o]!);
  const remainder = total - floors;
  const n = params.regions;
  const turn = (((d - id) % n) + n) % n;
  return portion(total, params.units[d]!) + Math.floor(remainder / n) + (turn < remainder % n ? 1 : 0);
}

/** l_d = base_d + Σ_o x[o][d] − Σ_o x[d][o], from whoever's view `slot` is (the slot's id picks the base). */
export function windowAllowance(params: FederationParams, slot: WindowSlot, d: number): number {
  return windowBase(params, d, slot.id) + netTransfer(slot, d);
}

/** A region's share of window w is forfeited when w started at or before its recovery fence. */
export function windowForfeited(params: FederationParams, fence: Fence, id: number): boolean {
  return fence > 0 && id <= windowIdAt(fence, params.periodMs);
}

export interface WindowDecision {
  allowed: boolean;
  /** Requests this region could still admit in the window (local allowance and global view). */
  remaining: number;
  /**
   * A false denial (docs/federation.md §4): denied by this region's allowance although its own view of the
   * window has global room for the request (cost ≤ L − G, and for the sliding window ≤ ⌊L − weighted − G⌋),
   * outside a forfeited window. Always false when allowed.
   */
  falseDenial: boolean;
  /**
   * The new state; the very same object when truly denied (a denial changes nothing). A false denial refreshes
   * this region's t in the window (demand), nothing else.
   */
  state: WindowState;
}

export function decideWindow(
  params: FederationParams,
  state: WindowState,
  fence: Fence,
  now: number,
  cost: number,
  sliding: boolean,
): WindowDecision {
  const r = params.self;
  const id = windowIdAt(now, params.periodMs);
  const cells = windowCells(state, id);
  const global = sum(cells.c);
  const local = params.budget === null ? Infinity : windowAllowance(params, cells, r) - cells.c[r]!;
  let room = params.limit - global;
  if (sliding) {
    // Smoothing: the previous window's global count weighted by how much of it the sliding window still covers.
    const previous = sum(windowCells(state, id - 1).c);
    const elapsed = now - id * params.periodMs;
    const weighted = (previous * (params.periodMs - elapsed)) / params.periodMs;
    room = Math.min(room, Math.floor(params.limit - weighted - global));
  }
  const remaining = Math.max(0, Math.min(local, room));
  if (windowForfeited(params, fence, id)) return { allowed: false, remaining: 0, falseDenial: false, state };
  if (cost > remaining) {
    if (cost > room) return { allowed: false, remaining, falseDenial: false, state };
    // A false denial is demand: it refreshes this region's admission time (never its count), so its peers keep
    // seeing it hungry while it waits for a grant (§2, "demand").
    const touched = withSlot(state, id);
    const cells = touched.slots[slotIndex(id)]!;
    cells.t[r] = Math.max(cells.t[r]!, now);
    return { allowed: false, remaining, falseDenial: true, state: touched };
  }
  const next = withSlot(state, id);
  const slot = next.slots[slotIndex(id)]!;
  slot.c[r] = slot.c[r]! + cost;
  slot.t[r] = Math.max(slot.t[r]!, now);
  acknowledge(slot, r);
  return { allowed: true, remaining: remaining - cost, falseDenial: false, state: next };
}

/** A copy of `state` in which slot `id` exists (reset if it held an older window). */
function withSlot(state: WindowState, id: number): WindowState {
  const slots = state.slots.map(cloneWindowSlot);
  const index = slotIndex(id);
  if (slots[index]!.id !== id) slots[index] = emptyWindowSlot(slots[index]!.c.length, id);
  return { slots };
}

/** a[r][d] := max(a[r][d], c[d]): r acknowledges everything it has seen (a cell never decreases). */
function acknowledge(slot: WindowSlot, r: number): void {
  for (let d = 0; d < slot.c.length; d++) slot.a[r]![d] = Math.max(slot.a[r]![d]!, slot.c[d]!);
}

export interface MergeResult<S> {
  state: S;
  /** True when the merge or the rebalance after it changed anything (the key is then pending for every peer). */
  changed: boolean;
}

/** Is `id` within the kept range around the local clock? Older windows are dropped, further ones too. */
function kept(id: number, current: number): boolean {
  return id >= current - 1 && id <= current + 1;
}

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

function sameWindowSlot(left: WindowSlot, right: WindowSlot): boolean {
  if (left.id !== right.id) return false;
  for (let o = 0; o < left.c.length; o++) {
    if (left.c[o] !== right.c[o] || left.t[o] !== right.t[o]) return false;
    for (let d = 0; d < left.c.length; d++) {
      if (left.x[o]![d] !== right.x[o]![d] || left.a[o]![d] !== right.a[o]![d]) return false;
    }
  }
  return true;
}

function sameEpochSlot(left: EpochSlot, right: EpochSlot): boolean {
  if (left.id !== right.id) return false;
  for (let o = 0; o < left.c.length; o++) {
    if (left.c[o] !== right.c[o] || left.t[o] !== right.t[o]) return false;
    for (let d = 0; d < left.c.length; d++) if (left.x[o]![d] !== right.x[o]![d] || left.y[o]![d] !== right.y[o]![d]) return false;
  }
  return true;
}

/** Active: admitted something within idleMs of `now` (clocks differ by at most the skew; a heuristic). */
function active(slot: Slot, d: number, now: number, policy: RebalancePolicy): boolean {
  return slot.t[d]! > 0 && now - slot.t[d]! <= policy.idleMs;
}

/**
 * Quiet: no admission in window (epoch) `slot.id` for the quiet span (idleMs/5, at most P/20) and for ten of its
 * own average gaps in it, so a region with steady low traffic is not mistaken for a free donor by one long gap.
 * (A peer stays "active", and so can be hungry, for the whole idleMs; a starved region's false denials refresh
 * its t, so a region waiting for a grant never looks quiet.)
 */
const QUIET_GAPS = 10;
function quiet(params: FederationParams, slot: Slot, d: number, now: number): boolean {
  if (slot.t[d]! <= 0) return true;
  const gaps = slot.c[d]! > 0 ? (QUIET_GAPS * (slot.t[d]! - slot.id * params.periodMs)) / slot.c[d]! : 0;
  return now - slot.t[d]! > Math.max(quietSpan(params), gaps);
}

/**
 * A free donor gives (nearly) all it holds. It admitted in this window (epoch) and has gone quiet since: its
 * traffic stopped or moved, so what it keeps for its own use is stranded. Traffic that began in this window
 * needs only the quiet span of silence (the average gap since the window's start says nothing about a burst that
 * started late in it); traffic carried over from the previous window also ten of its gaps (quiet()). Or it
 * admitted nothing in this window yet and was quiet in the previous one (a region with steady traffic admits
 * nothing yet at a window's start: the previous window tells it apart from an idle one there).
 */
function freeDonor(params: FederationParams, slot: Slot, previous: Slot, r: number, now: number): boolean {
  if (slot.t[r]! <= 0) return quiet(params, previous, r, now);
  if (previous.c[r]! > 0) return quiet(params, slot, r, now);
  return now - slot.t[r]! > quietSpan(params);
}

/** The least silence that makes a region quiet: idleMs/5, at most a twentieth of the period. */
function quietSpan(params: FederationParams): number {
  return Math.min(params.rebalance.idleMs / 5, params.periodMs / 20);
}

/** Hungry: active and not quiet, and used more than hungerFraction of its allowance. */
function hungry(params: FederationParams, slot: Slot, d: number, allowance: number, now: number): boolean {
  const used = slot.c[d]!;
  return (
    used > 0 && used > params.rebalance.hungerFraction * allowance && active(slot, d, now, params.rebalance) && !quiet(params, slot, d, now)
  );
}

/** A free donor's targets: hungry peers and peers admitting right now (not quiet). */
function wanting(params: FederationParams, slot: Slot, d: number, allowance: number, now: number, free: boolean): boolean {
  return hungry(params, slot, d, allowance, now) || (free && !quiet(params, slot, d, now));
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
  const free = freeDonor(params, slot, windowCells(state, id - 1), r, now);
  if (!free && hungry(params, slot, r, ownAllowance, now)) return state;
  const targets: number[] = [];
  for (let d = 0; d < params.regions; d++) {
    if (d === r) continue;
    if (wanting(params, slot, d, windowAllowance(params, slot, d), now, free)) targets.push(d);
  }
  if (targets.length === 0) return state;
  let reserve: number;
  if (free) reserve = (id + 1) * params.periodMs - now <= Math.min(policy.idleMs, params.periodMs / 10) ? 0 : 1;
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

/** Does r's view show a hungry peer in the current window? Then the key belongs in the sweep set. */
export function windowHasHungryPeer(params: FederationParams, state: WindowState, now: number): boolean {
  if (params.budget === null || params.regions < 2) return false;
  const slot = windowCells(state, windowIdAt(now, params.periodMs));
  for (let d = 0; d < params.regions; d++) {
    if (d !== params.self && hungry(params, slot, d, windowAllowance(params, slot, d), now)) return true;
  }
  return false;
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

// ---------------------------------------------------------------------------------------------------------
// Token bucket

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

/** The end-of-epoch span of a bucket: the last min(P/10, idleMs/5) ms (received share goes back home). */
function returning(params: FederationParams, now: number): boolean {
  const end = (windowIdAt(now, params.periodMs) + 1) * params.periodMs;
  return end - now <= Math.min(params.periodMs / 10, params.rebalance.idleMs / 5);
}

/** Per peer d: the share r holds of d's (what d gave r, less what r gave d), when positive. */
function heldFrom(slot: EpochSlot, r: number, d: number): number {
  return Math.max(0, slot.x[d]![r]! - slot.x[r]![d]!);
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

export interface BucketDecision {
  allowed: boolean;
  /** Tokens left (after this request when allowed). */
  remaining: number;
  /**
   * A false denial (docs/federation.md §4): federated, outside a fence's zero-share span, denied for lack of
   * this region's tokens although its view shows the federation below what one global bucket holds: at
   * least min(C, L) less the previous epoch's use when the epoch began, plus the refill since:
   * Σ_o c_e[o] + cost ≤ max(0, min(C, L) − Σ_o c_{e−1}[o]) + L·(now − eP)/P. Always false when allowed.
   */
  falseDenial: boolean;
  /**
   * The new state; the very same object (possibly undefined) when truly denied. A false denial of a stored
   * bucket refreshes this region's t in the epoch (demand), nothing else.
   */
  state: BucketState | undefined;
}

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
    if (!falseDenial || state === undefined) return { allowed: false, remaining: tokens, falseDenial, state };
    // Demand, as for windows: t[r] refreshed in the epoch's slot; tokens and refill time untouched.
    const touched = withEpochSlot(state.slots, epoch);
    const cells = touched[slotIndex(epoch)]!;
    cells.t[params.self] = Math.max(cells.t[params.self]!, now);
    return { allowed: false, remaining: tokens, falseDenial, state: { ...state, slots: touched } };
  }
  const slots = withEpochSlot(current.slots, epoch);
  const slot = slots[slotIndex(epoch)]!;
  slot.c[params.self] = slot.c[params.self]! + cost;
  slot.t[params.self] = Math.max(slot.t[params.self]!, now);
  return {
    allowed: true,
    remaining: tokens - cost,
    falseDenial: false,
    state: { tokens: tokens - cost, lastRefill: now, sig: shareAt(params, slots, fence, now), slots },
  };
}

/** decideBucket's false denial test for a denied request (BucketDecision.falseDenial). */
function bucketFalseDenial(params: FederationParams, bucket: BucketState, fence: Fence, now: number, cost: number): boolean {
  if (params.regions === 1 || now < bucketFenceEnd(params, fence)) return false;
  const epoch = windowIdAt(now, params.periodMs);
  const used = sum(epochCells(bucket.slots, epoch).c);
  // The global bucket held at least min(C, L) less the previous epoch's use when this epoch began (§4).
  const carried = Math.max(0, Math.min(params.capacity, params.limit) - sum(epochCells(bucket.slots, epoch - 1).c));
  return used + cost <= carried + (params.limit * (now - epoch * params.periodMs)) / params.periodMs;
}

function withEpochSlot(slots: readonly EpochSlot[], id: number): EpochSlot[] {
  const next = slots.map(cloneEpochSlot);
  const index = slotIndex(id);
  if (next[index]!.id !== id) next[index] = emptyEpochSlot(next[index]!.c.length, id);
  return next;
}

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

/** σ_d from a view without the skew term: the share d holds for the epoch as far as this region knows. */
export function viewShare(params: FederationParams, slot: EpochSlot, d: number): number {
  return params.units[d]! + netTransfer(slot, d);
}

/**
 * A bucket region is hungry when it admitted more than hungerFraction of what its share refilled so far in the
 * epoch (paced), or when it is admitting while holding less than hungerFraction of its base share: a region
 * that gave its share away and gets traffic again shows little paced use over a long epoch, yet needs share now.
 */
function bucketHungry(params: FederationParams, slot: EpochSlot, d: number, elapsed: number, now: number): boolean {
  const share = viewShare(params, slot, d);
  const paced = (params.limit * share * elapsed) / (params.periodMs * SHARE_UNITS);
  if (hungry(params, slot, d, paced, now)) return true;
  return share < params.rebalance.hungerFraction * params.units[d]! && wantsShare(params, slot, d, now);
}

/** Admitting (c > 0, active, not quiet), whatever its allowance. */
function wantsShare(params: FederationParams, slot: EpochSlot, d: number, now: number): boolean {
  return slot.c[d]! > 0 && active(slot, d, now, params.rebalance) && !quiet(params, slot, d, now);
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
  const selfHungry = !free && bucketHungry(params, slot, r, elapsed, now);
  const targets: number[] = [];
  for (let d = 0; d < params.regions; d++) {
    if (d === r || !(bucketHungry(params, slot, d, elapsed, now) || (free && !quiet(params, slot, d, now)))) continue;
    if (!selfHungry || viewShare(params, slot, d) < params.units[d]!) targets.push(d);
  }
  if (targets.length === 0) return unchanged;
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
  const amounts: number[] = [];
  let left = share;
  let total = 0;
  for (let d = 0; d < params.regions; d++) {
    const amount = d === r ? 0 : Math.min(heldFrom(slot, r, d), left);
    amounts.push(amount);
    left -= amount;
    total += amount;
  }
  if (total < Math.max(1, params.rebalance.minSurplus)) return { slots: [...slots], tokens };
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

/**
 * Does r's bucket need the sweep: a hungry peer in its view of the current epoch, or (for the end-of-epoch
 * return) share it holds of a peer's?
 */
export function bucketHasHungryPeer(params: FederationParams, state: BucketState, now: number): boolean {
  if (!transfersAllowed(params)) return false;
  const epoch = windowIdAt(now, params.periodMs);
  const elapsed = Math.max(1, now - epoch * params.periodMs);
  const slot = epochCells(state.slots, epoch);
  for (let d = 0; d < params.regions; d++) {
    if (d !== params.self && (bucketHungry(params, slot, d, elapsed, now) || heldFrom(slot, params.self, d) > 0)) return true;
  }
  return false;
}

/** The token-bucket sweep: refill, rebalance the current epoch, clamp (see sweepWindow). */
export function sweepBucket(params: FederationParams, state: BucketState, fence: Fence, now: number): MergeResult<BucketState> {
  if (!transfersAllowed(params) || now < bucketFenceEnd(params, fence)) return { state, changed: false };
  const { slots, tokens } = rebalanceBucket(params, state.slots, fence, now, refill(params, state, fence, now));
  if (slots.every((slot, index) => sameEpochSlot(slot, state.slots[index]!))) return { state, changed: false };
  const share = shareAt(params, slots, fence, now);
  return { state: { tokens: Math.min(tokens, bucketCapacity(params, share)), lastRefill: now, sig: share, slots }, changed: true };
}

export function bucketGossip(state: BucketState): EpochSlot[] {
  return state.slots.filter((slot) => slot.id >= 0).map(cloneEpochSlot);
}

// The window algorithms (fixedWindow, slidingWindow) on the request path: a region's base share and
// allowance of a window, the recovery fence's forfeit, the decision with the state it leaves, and the
// federation's remaining quota as the decision sees it.
// Lua mirror: lua/includes/window_decide.lua (window_base, window_allowance, window_forfeited, acknowledge,
// window_quota_remaining, decide_window, commit_window).
import { windowIdAt, type Fence, type FederationParams } from './params.ts';
import { KEPT_WINDOWS, cloneWindowSlot, emptyWindowSlot, netTransfer, slotIndex, sum, type WindowSlot } from './slots.ts';

export interface WindowState {
  /** KEPT_WINDOWS slots; slot k holds a window id ≡ k (mod 3) or -1. */
  slots: WindowSlot[];
}

/** A window key this region has no state for: KEPT_WINDOWS empty slots of `n` regions. */
export function newWindowState(n: number): WindowState {
  return { slots: Array.from({ length: KEPT_WINDOWS }, () => emptyWindowSlot(n)) };
}

/** The cells of window `id`, zeros when the slot holds another window. Never mutate the result. */
export function windowCells(state: WindowState, id: number): WindowSlot {
  const slot = state.slots[slotIndex(id)]!;
  return slot.id === id ? slot : emptyWindowSlot(slot.c.length, id);
}

/**
 * base_d(w): region d's part of T = L + B in window w. Every region starts from floor(T·u_d/Σu) and the remainder
 * R = T − Σ_o floor(T·u_o/Σu) (fewer than N units) goes one unit at a time to the region with the largest
 * u_d/(s_d + 1), s_d what it holds so far (D'Hondt's priority, in exact integer products); equal priorities go to
 * the region whose turn comes first, rotating with the window id (with equal weights: R regions get one more,
 * in turn). Every region computes the same split from the config, and Σ_d base_d = T exactly (floor per region
 * would lose up to N−1 requests: 9 of 10 for /checkout). The split is **house-monotone**: for one window, a larger
 * T never gives any region less (the units of T are those of T − 1 plus one), so a limit raised in the middle of
 * a window never leaves a region above its new base (the old largest-remainder split gave weights 1, 2, 3 the
 * bases 1, 0, 2 at T = 3 and 0, 1, 3 at T = 4: 5 admitted under L = 4; docs/federation.md §4). Unbounded mode has
 * no local limit (Infinity).
 */
export function windowBase(params: FederationParams, d: number, id = 0): number {
  if (params.budget === null) return Infinity;
  const total = params.limit + params.budget;
  const n = params.regions;
  let units = 0;
  for (let o = 0; o < n; o++) units += params.units[o]!;
  // floor(T·u_o/Σu), a lower bound of every region's D'Hondt part, leaves fewer than N units to place.
  const held: number[] = [];
  let remainder = total;
  for (let o = 0; o < n; o++) {
    held.push(Math.floor((total * params.units[o]!) / units));
    remainder -= held[o]!;
  }
  const turn = (o: number) => (((o - id) % n) + n) % n;
  for (; remainder > 0; remainder--) {
    let best = 0;
    for (let o = 1; o < n; o++) {
      // u_o/(s_o + 1) against u_best/(s_best + 1), cross-multiplied (exact below 2^53).
      const ahead = params.units[o]! * (held[best]! + 1) - params.units[best]! * (held[o]! + 1);
      if (ahead > 0 || (ahead === 0 && turn(o) < turn(best))) best = o;
    }
    held[best] = held[best]! + 1;
  }
  return held[d]!;
}

/** l_d = base_d + Σ_o x[o][d] − Σ_o x[d][o], from whoever's view `slot` is (the slot's id picks the base). */
export function windowAllowance(params: FederationParams, slot: WindowSlot, d: number): number {
  return windowBase(params, d, slot.id) + netTransfer(slot, d);
}

/** A region's share of window w is forfeited when w started at or before its recovery fence. */
export function windowForfeited(params: FederationParams, fence: Fence, id: number): boolean {
  return fence > 0 && id <= windowIdAt(fence, params.periodMs);
}

/**
 * The federation's remaining quota in a window as region r's view has it, after a decision: what one exact
 * global limiter would answer if r's view were the whole federation,
 *
 *   quota = 0                                           in a forfeited window (r admits nothing there, and a
 *                                                       wiped view cannot say what the federation used)
 *         = max(remaining, room − admitted, 0)           otherwise,
 *
 * with `room` decideWindow's global room before the request (L − G, and for the sliding window at most
 * ⌊L − weighted previous − G⌋), `admitted` the request's cost when it was admitted (0 when denied) and
 * `remaining` what r itself can still admit (decideWindow's remaining).
 *
 * Given the view it is exact: r's view is every admission r has heard of, and L − G is what a global counter
 * holding those admissions would leave. Against the truth it is off by sync lag only: views never exceed the
 * truth (docs/federation.md §2), so admissions not yet gossiped to r make it at most that much too high, and
 * it falls as they arrive. It is never below `remaining` (remaining = min(allowance, room) − admitted ≤
 * room − admitted when admitted, and ≤ max(room, 0) when denied; the max makes it so in every case), so a
 * client pacing on it is never told less than this region would admit now.
 *
 * @example
 * ```ts
 * windowQuotaRemaining(1_000 - 1, 347, 1, false); // 998: a 1,000 window, one admission seen before, cost 1
 * windowQuotaRemaining(5, 0, 0, true); // 0: forfeited
 * ```
 */
export function windowQuotaRemaining(room: number, remaining: number, admitted: number, forfeited: boolean): number {
  if (forfeited) return 0;
  return Math.max(remaining, room - admitted, 0);
}

/** What decideWindow answers for one request. */
export interface WindowDecision {
  allowed: boolean;
  /** Requests this region could still admit in the window (local allowance and global view). */
  remaining: number;
  /** The federation's remaining quota as this region's view has it, after this request (windowQuotaRemaining). */
  quotaRemaining: number;
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

/**
 * Decide one request of `cost` at `now` for a window rule (`sliding`: the sliding-window counter): admit while
 * this region's allowance and the global view both have room.
 */
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
  if (windowForfeited(params, fence, id))
    return { allowed: false, remaining: 0, quotaRemaining: windowQuotaRemaining(room, 0, 0, true), falseDenial: false, state };
  if (cost > remaining) {
    const quotaRemaining = windowQuotaRemaining(room, remaining, 0, false);
    if (cost > room) return { allowed: false, remaining, quotaRemaining, falseDenial: false, state };
    // A false denial is demand: it refreshes this region's admission time (never its count), so its peers keep
    // seeing it hungry while it waits for a grant (§2, "demand").
    const touched = withSlot(state, id);
    const cells = touched.slots[slotIndex(id)]!;
    cells.t[r] = Math.max(cells.t[r]!, now);
    return { allowed: false, remaining, quotaRemaining, falseDenial: true, state: touched };
  }
  const next = withSlot(state, id);
  const slot = next.slots[slotIndex(id)]!;
  slot.c[r] = slot.c[r]! + cost;
  slot.t[r] = Math.max(slot.t[r]!, now);
  acknowledge(slot, r);
  return {
    allowed: true,
    remaining: remaining - cost,
    quotaRemaining: windowQuotaRemaining(room, remaining - cost, cost, false),
    falseDenial: false,
    state: next,
  };
}

/** A copy of `state` in which slot `id` exists (reset if it held an older window). */
export function withSlot(state: WindowState, id: number): WindowState {
  const slots = state.slots.map(cloneWindowSlot);
  const index = slotIndex(id);
  if (slots[index]!.id !== id) slots[index] = emptyWindowSlot(slots[index]!.c.length, id);
  return { slots };
}

/** a[r][d] := max(a[r][d], c[d]): r acknowledges everything it has seen (a cell never decreases). */
export function acknowledge(slot: WindowSlot, r: number): void {
  for (let d = 0; d < slot.c.length; d++) slot.a[r]![d] = Math.max(slot.a[r]![d]!, slot.c[d]!);
}

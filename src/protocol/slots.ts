// Views: per window (or epoch) id, a matrix of max-merged cells. Slot k of a key holds the id ≡ k (mod
// KEPT_WINDOWS); a slot holding another id reads as zeros (`id: -1` is an empty slot). This file holds the slot
// shapes, their join (a cellwise max) and the few sums every algorithm reads from a slot.
// Lua mirror: lua/includes/federation.lua (slot_index, empty_slot, cells_of, sum_cells, net_transfer) and
// lua/includes/rebalance.lua (join_slots, same_slot).

/** Window (or epoch) slots kept per key: the previous, the current and one early window (a peer ahead). */
export const KEPT_WINDOWS = 3;

/** One window of a window key, as every region holds and gossips it (cells only grow). */
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

/** One epoch of a token-bucket key (the share and token moves; the tokens themselves stay regional). */
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

/** A slot of either kind: what the demand signals (demand.ts) read. */
export type Slot = WindowSlot | EpochSlot;

function zeros(n: number): number[] {
  return new Array<number>(n).fill(0);
}

function matrix(n: number): number[][] {
  return Array.from({ length: n }, () => zeros(n));
}

/** A window slot of `n` regions with every cell 0 (`id` -1: the empty slot). */
export function emptyWindowSlot(n: number, id = -1): WindowSlot {
  return { id, c: zeros(n), x: matrix(n), a: matrix(n), t: zeros(n) };
}

/** An epoch slot of `n` regions with every cell 0 (`id` -1: the empty slot). */
export function emptyEpochSlot(n: number, id = -1): EpochSlot {
  return { id, c: zeros(n), x: matrix(n), y: matrix(n), t: zeros(n) };
}

/** A deep copy of a window slot. */
export function cloneWindowSlot(slot: WindowSlot): WindowSlot {
  return { id: slot.id, c: [...slot.c], x: slot.x.map((row) => [...row]), a: slot.a.map((row) => [...row]), t: [...slot.t] };
}

/** A deep copy of an epoch slot. */
export function cloneEpochSlot(slot: EpochSlot): EpochSlot {
  return { id: slot.id, c: [...slot.c], x: slot.x.map((row) => [...row]), y: slot.y.map((row) => [...row]), t: [...slot.t] };
}

/** The position k = id mod KEPT_WINDOWS (never negative) that holds window (epoch) `id`. */
export function slotIndex(id: number): number {
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

/** Cellwise max of two epoch slots with the same id (a join, as joinWindowSlots). */
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

/** Do two window slots hold the same id and cells? */
export function sameWindowSlot(left: WindowSlot, right: WindowSlot): boolean {
  if (left.id !== right.id) return false;
  for (let o = 0; o < left.c.length; o++) {
    if (left.c[o] !== right.c[o] || left.t[o] !== right.t[o]) return false;
    for (let d = 0; d < left.c.length; d++) {
      if (left.x[o]![d] !== right.x[o]![d] || left.a[o]![d] !== right.a[o]![d]) return false;
    }
  }
  return true;
}

/** Do two epoch slots hold the same id and cells? */
export function sameEpochSlot(left: EpochSlot, right: EpochSlot): boolean {
  if (left.id !== right.id) return false;
  for (let o = 0; o < left.c.length; o++) {
    if (left.c[o] !== right.c[o] || left.t[o] !== right.t[o]) return false;
    for (let d = 0; d < left.c.length; d++) if (left.x[o]![d] !== right.x[o]![d] || left.y[o]![d] !== right.y[o]![d]) return false;
  }
  return true;
}

/** Σ of a row of cells. */
export function sum(values: readonly number[]): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}

/** Σ_{o≠d} x[o][d] − Σ_{o≠d} x[d][o]: what d received minus what it gave, in one slot. */
export function netTransfer(slot: EpochSlot | WindowSlot, d: number): number {
  let net = 0;
  for (let o = 0; o < slot.c.length; o++) {
    if (o === d) continue;
    net += slot.x[o]![d]! - slot.x[d]![o]!;
  }
  return net;
}

/** Per peer d: what r holds of d's allowance (share) in one slot: what d gave r less what r gave d, when positive. */
export function heldFrom(slot: EpochSlot | WindowSlot, r: number, d: number): number {
  return Math.max(0, slot.x[d]![r]! - slot.x[r]![d]!);
}

/**
 * What a return hands back to each peer d (index d; 0 for r): what r holds of d's, in index order, as far as `spare`
 * covers it; undefined when the total is below max(1, minSurplus) (nothing worth a message).
 */
export function returnAmounts(slot: EpochSlot | WindowSlot, r: number, spare: number, minSurplus: number): number[] | undefined {
  const amounts: number[] = [];
  let left = Math.max(0, spare);
  let total = 0;
  for (let d = 0; d < slot.c.length; d++) {
    const amount = d === r ? 0 : Math.min(heldFrom(slot, r, d), left);
    amounts.push(amount);
    left -= amount;
    total += amount;
  }
  return total < Math.max(1, minSurplus) ? undefined : amounts;
}

/** What a merge or a sweep returns. */
export interface MergeResult<S> {
  state: S;
  /** True when the merge or the rebalance after it changed anything (the key is then pending for every peer). */
  changed: boolean;
}

/** Is `id` within the kept range around the local clock? Older windows are dropped, further ones too. */
export function kept(id: number, current: number): boolean {
  return id >= current - 1 && id <= current + 1;
}

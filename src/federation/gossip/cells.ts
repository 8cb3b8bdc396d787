// A state hash as gossip carries it: per window slot the id and the cumulative cells c, x, a and t, flattened in
// the order apply_gossip.lua reads its ARGV (id, n values c[o], n·n values x[o][d], n·n values a[o][d], n values
// t[o]). Token-bucket fields (tokens, last_refill, sig) are regional and never gossiped; token-bucket slots carry
// y[o][d] (tokens moved with the share) in the a cells.
import { KEPT_WINDOWS } from '../../protocol/index.ts';

export interface SlotCells {
  id: number;
  /** c[o] */
  c: number[];
  /** x[o·n + d] */
  x: number[];
  /** a[o·n + d] */
  a: number[];
  /** t[o]: region o's clock at its last admission in this window (0 = none). */
  t: number[];
}

export interface DecodedState {
  slots: SlotCells[];
  /** ms time of the last change (t), 0 when absent. */
  changedAt: number;
  /** change version (v), 0 when absent. */
  version: number;
  /** Regional token-bucket fields, for the admin view. */
  regional: Record<string, string>;
  /** The silent flag z: no cell of another region and no transfer is in the hash (lua/includes/federation.lua load_silent). */
  silent: boolean;
}

/** Length of one flattened slot: id + c + x + a + t. */
export function slotLength(n: number): number {
  return 1 + 2 * n + 2 * n * n;
}

/** Offset of the t cells in a flattened slot (they are times, the cells before them counts). */
export function timeCellsOffset(n: number): number {
  return 1 + n + 2 * n * n;
}

// Field names of slot k (0 ≤ k < KEPT_WINDOWS, a single digit): w<k>, c<k>.<o>, x<k>.<o>.<d>, a<k>.<o>.<d>, t<k>.<o>.
const SLOT_DIGIT = `[0-${KEPT_WINDOWS - 1}]`;
const CELL = new RegExp(`^([cxat])(${SLOT_DIGIT})\\.(\\d+)(?:\\.(\\d+))?$`);
const SLOT_ID = new RegExp(`^w(${SLOT_DIGIT})$`);

/**
 * A slot of window or epoch `id` with every cell 0, for `n` regions.
 *
 * @example
 * const slot = emptySlotCells(29_938_385, 3); // then slot.c[1] = 5, and flattenSlot(slot) for apply_gossip.lua
 */
export function emptySlotCells(id: number, n: number): SlotCells {
  return { id, c: new Array(n).fill(0), x: new Array(n * n).fill(0), a: new Array(n * n).fill(0), t: new Array(n).fill(0) };
}

/** Decodes HGETALL output (flat [field, value, ...] or an object) of a window or token-bucket state key. */
export function decodeState(raw: readonly string[] | Record<string, string>, n: number): DecodedState {
  const pairs: [string, string][] = Array.isArray(raw)
    ? Array.from({ length: Math.floor(raw.length / 2) }, (_, i) => [String(raw[2 * i]), String(raw[2 * i + 1])])
    : Object.entries(raw as Record<string, string>);
  const slots: (SlotCells | undefined)[] = new Array(KEPT_WINDOWS).fill(undefined);
  const cells: [string, number, number, number | undefined, number][] = [];
  const regional: Record<string, string> = {};
  let changedAt = 0;
  let version = 0;
  let silent = false;
  for (const [field, value] of pairs) {
    const slotId = SLOT_ID.exec(field);
    if (slotId) {
      slots[Number(slotId[1])] = emptySlotCells(Number(value), n);
      continue;
    }
    const cell = CELL.exec(field);
    if (cell) {
      cells.push([cell[1]!, Number(cell[2]), Number(cell[3]), cell[4] === undefined ? undefined : Number(cell[4]), Number(value)]);
      continue;
    }
    if (field === 't') changedAt = Number(value);
    else if (field === 'v') version = Number(value);
    else if (field === 'z') silent = value === '1';
    else regional[field] = value;
  }
  for (const [kind, k, o, d, value] of cells) {
    const slot = slots[k];
    if (!slot || o >= n || !Number.isFinite(value)) continue;
    if (kind === 'c' || kind === 't') {
      if (d === undefined) slot[kind][o] = value;
    } else if (d !== undefined && d < n) {
      (kind === 'x' ? slot.x : slot.a)[o * n + d] = value;
    }
  }
  return { slots: slots.filter((slot): slot is SlotCells => slot !== undefined), changedAt, version, regional, silent };
}

export function flattenSlot(slot: SlotCells): number[] {
  return [slot.id, ...slot.c, ...slot.x, ...slot.a, ...slot.t];
}

export function unflattenSlot(flat: readonly number[], n: number): SlotCells {
  return {
    id: flat[0]!,
    c: flat.slice(1, 1 + n),
    x: flat.slice(1 + n, 1 + n + n * n),
    a: flat.slice(1 + n + n * n, 1 + n + 2 * n * n),
    t: flat.slice(1 + n + 2 * n * n, 1 + 2 * n + 2 * n * n),
  };
}

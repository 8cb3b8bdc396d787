// Which peers a merge's result goes to (`mergeMarks`). A merge in which this region gave (a grant or a return) goes
// to every peer. One that gave nothing goes back to the sender only when the sender's view of this region's own row
// is behind (`ownRowAhead`: a silent region's count, or a grant the sender has not merged yet, reaches a peer that is
// talking about the key now, without echoing a merge back to a sender that has everything it carries), and to the
// peers but its sender only when it brought them news (`relayWorthy`: the relay, a third region hears through this
// one what the sender knew of the others, of transfers and acknowledgements), not when all it brought was what the
// sender sends every peer itself (its own count and time; a bucket's own transfers).
// Lua mirror: lua/includes/apply_gossip.lua (own_row_ahead, relay_worthy, the marks after a merge).
import { slotIndex, type EpochSlot, type Slot, type WindowSlot } from './slots.ts';

/**
 * Whether region `self`'s own row (its count c, its time t and its transfers x[self][·]) in `merged` is ahead of
 * the sender's view of it in `incoming`, in a window or epoch the sender sent. Acknowledgements and token amounts
 * are left out: no decision reads the first, and the second moves with its transfer.
 *
 * @example
 * ```ts
 * // The sender saw 3 admissions of region 1 in window 42; region 1 has admitted 5 there (2 of them silent).
 * ownRowAhead([{ ...slot, id: 42, c: [9, 3, 0] }], [{ ...slot, id: 42, c: [9, 5, 0] }], 1); // true
 * ```
 */
export function ownRowAhead(incoming: readonly Slot[], merged: readonly Slot[], self: number): boolean {
  for (const sent of incoming) {
    const own = merged.find((slot) => slot.id === sent.id);
    if (own === undefined) continue;
    if (own.c[self]! > sent.c[self]! || own.t[self]! > sent.t[self]!) return true;
    for (let d = 0; d < sent.c.length; d++) if (own.x[self]![d]! > sent.x[self]![d]!) return true;
  }
  return false;
}

/** The transfer-sized cells of a slot: a window's acknowledgements a, a token bucket's tokens moved y. */
function pairCells(slot: Slot): number[][] {
  return 'a' in slot ? (slot as WindowSlot).a : (slot as EpochSlot).y;
}

/**
 * Whether a merge of `incoming` (a sender's slots) into `held` (this region's slots before it) brings the third
 * regions anything the sender does not send them itself: a cell of `incoming` above the held one in the same window
 * or epoch (a held slot of an older window counts as zeros; an incoming slot older than the held one is not merged),
 * other than the sender's own count `c[sender]` and time `t[sender]` and, for a token bucket, the rest of the
 * sender's own row (its transfers `x[sender][·]` and the tokens moved with them `y[sender][·]`). The sender marks its
 * count and time for every peer when it sends them (a loud admission), and a bucket's transfer with its tokens when it
 * makes it (a grant or a return goes to every peer), so relaying them only doubles the traffic on a healthy mesh;
 * what else a merge brings (a third region's cells, a window's transfer or acknowledgement) is what the relay is for:
 * a peer's rebalance runs when a merge changes its state, and the simulation's accuracy rests on those merges
 * (docs/federation.md §2 "Who hears a merge"; a window's own transfers stay relayed because the fixed window's
 * sequential case at L = 10 falls to 80% without them).
 *
 * @example
 * ```ts
 * // Region 0 sent its own count 7 → 9 in window 42: nothing for region 2 that region 0 does not send it itself.
 * const held = [{ ...slot, id: 42, c: [7, 0, 0] }];
 * relayWorthy(held, [{ ...slot, id: 42, c: [9, 0, 0] }], 0); // false
 * // It also carries region 2's count as it saw it (2 above what this region held): relayed.
 * relayWorthy(held, [{ ...slot, id: 42, c: [9, 0, 2] }], 0); // true
 * ```
 */
export function relayWorthy(held: readonly Slot[], incoming: readonly Slot[], sender: number): boolean {
  for (const sent of incoming) {
    if (sent.id < 0) continue;
    // The held slot in the incoming one's place: a newer window there means this one is not merged.
    if (held.some((slot) => slot.id > sent.id && slotIndex(slot.id) === slotIndex(sent.id))) continue;
    const mine = held.find((slot) => slot.id === sent.id);
    const n = sent.c.length;
    const sentPairs = pairCells(sent);
    const minePairs = mine === undefined ? undefined : pairCells(mine);
    // A bucket's sender sends its whole row itself (a window's own transfers stay relayed: see above).
    const ownRowSent = !('a' in sent);
    for (let o = 0; o < n; o++) {
      if (o === sender && ownRowSent) continue;
      if (o !== sender && (sent.c[o]! > (mine?.c[o] ?? 0) || sent.t[o]! > (mine?.t[o] ?? 0))) return true;
      for (let d = 0; d < n; d++) {
        if (sent.x[o]![d]! > (mine?.x[o]?.[d] ?? 0)) return true;
        if (sentPairs[o]![d]! > (minePairs?.[o]?.[d] ?? 0)) return true;
      }
    }
  }
  return false;
}

/** The peers a merge's result is marked for: its sender, and every other peer. */
export interface MergeMarks {
  sender: boolean;
  others: boolean;
}

/**
 * Who hears a merge that changed this region's state: every peer when this region gave in it (`gave`: its own
 * transfers grew, a grant or a return); otherwise the sender when its view of this region's own row is behind
 * (`ahead`, ownRowAhead) and the others when it brought them news (`worthy`, relayWorthy). The others do not hear of
 * a merge only because the sender was behind: what this region adds for them (its silent count) is no news the
 * sender brought, and they hear it when this region next talks to them; before this rule the merge went to every
 * peer, and a key that turned loud had each idle donor send the hot region the other's grant again (docs/federation.md §2).
 *
 * @example
 * ```ts
 * mergeMarks(true, false, false); // { sender: true, others: true }: a grant
 * mergeMarks(false, true, false); // { sender: true, others: false }: the sender had not seen this region's count
 * mergeMarks(false, false, true); // { sender: false, others: true }: the relay
 * ```
 */
export function mergeMarks(gave: boolean, ahead: boolean, worthy: boolean): MergeMarks {
  return { sender: gave || ahead, others: gave || worthy };
}

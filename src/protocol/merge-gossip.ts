// Which peers a merge's result goes to. A merge in which this region gave (a grant or a return) goes to every peer.
// One that gave nothing goes to the peers but its sender (the relay: the third region hears the sender's row through
// this one too), and back to the sender only when the sender's view of this region's own row is behind: a silent
// region's count, or a grant the sender has not merged yet, reaches a peer that is talking about the key now,
// without echoing a merge back to a sender that has everything it carries.
// Lua mirror: lua/includes/apply_gossip.lua (own_row_ahead).
import type { Slot } from './slots.ts';

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

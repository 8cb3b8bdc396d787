// Which peers a merge's result goes to (`mergeMarks`). A merge in which this region gave (a grant or a return) goes to
// every peer when this region admits in the key itself, and only to the peers it gave to (`granteesOf`) when it is idle
// there: an idle donor's grant is not passed on (the others hear of it with the next message this region sends them,
// which carries its whole row). Otherwise it goes back to the sender only when the sender's view of this region's own
// row is behind (`ownRowAhead`: a silent region's count, or a grant the sender has not merged yet, reaches a peer that
// is talking about the key now, without echoing a merge back to a sender that has everything it carries), and to each
// other peer only when it brought that peer news (`relayWorthy`, `relayTargets`: the relay, a third region hears
// through this one what the sender knew of the others, of transfers and acknowledgements), not when all it brought was
// what the sender sends them itself (its own count and time; a bucket's own transfers, which reach the others with the
// sender's next message to them) or the peer's own row.
// Lua mirror: lua/includes/apply_gossip.lua (own_row_ahead, relay_worthy, own_given, the marks after a merge).
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
 * Whether a merge of `incoming` (a sender's slots) into `held` (this region's slots before it) brings peer `target`
 * anything the sender does not send it itself and it does not hold already: a cell of `incoming` above the held one in
 * the same window or epoch (a held slot of an older window counts as zeros; an incoming slot older than the held one
 * is not merged), other than the sender's own count `c[sender]` and time `t[sender]`, for a token bucket the rest of
 * the sender's own row (its transfers `x[sender][·]` and the tokens moved with them `y[sender][·]`), and the target's
 * own row when `target` is given (its count, time, transfers and acknowledgements or tokens moved: only the target
 * writes them, so they are never news to it; relayTargets gives it for an idle relaying region). The sender marks its
 * count and time for every peer when it sends them (a loud admission), and a bucket's transfer with its tokens goes to
 * its grantee when it is made and to the others with the sender's next message, so relaying them only doubles the
 * traffic on a healthy mesh; what else a merge brings (a third region's cells, a window's transfer or acknowledgement)
 * is what the relay is for: a peer's rebalance runs when a merge changes its state, and the simulation's accuracy
 * rests on those merges (docs/federation.md §2 "Who hears a merge"; a window's own transfers stay relayed because the
 * fixed window's sequential case at L = 10 falls to 80% without them). Until 2026-12-05 the target's own row counted:
 * an idle donor heard its own grant back from the other donor, through whom the hot region's view of it had passed.
 *
 * @example
 * ```ts
 * // Region 0 sent its own count 7 → 9 in window 42: nothing for region 2 that region 0 does not send it itself.
 * const held = [{ ...slot, id: 42, c: [7, 0, 0] }];
 * relayWorthy(held, [{ ...slot, id: 42, c: [9, 0, 0] }], 0, 2); // false
 * // It also carries region 2's count as region 0 saw it: news for region 1, not for region 2.
 * relayWorthy(held, [{ ...slot, id: 42, c: [9, 0, 2] }], 0, 1); // true
 * relayWorthy(held, [{ ...slot, id: 42, c: [9, 0, 2] }], 0, 2); // false
 * ```
 */
export function relayWorthy(held: readonly Slot[], incoming: readonly Slot[], sender: number, target?: number): boolean {
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
      if ((o === sender && ownRowSent) || o === target) continue;
      if (o !== sender && (sent.c[o]! > (mine?.c[o] ?? 0) || sent.t[o]! > (mine?.t[o] ?? 0))) return true;
      for (let d = 0; d < n; d++) {
        if (sent.x[o]![d]! > (mine?.x[o]?.[d] ?? 0)) return true;
        if (sentPairs[o]![d]! > (minePairs?.[o]?.[d] ?? 0)) return true;
      }
    }
  }
  return false;
}

/**
 * The peers but the sender and `self` to which a merge of `incoming` into `held` is news: relayWorthy for each, the
 * peer's own row left out when `self` is idle in the key (`idle`: it admits nothing there, admitsIn). An idle
 * region's relays carry only what the sender knew of the others; a region that admits relays as it did before
 * 2026-12-05 (a third region's cells, its own row included), since those relays also carry the sender's latest
 * counts to a peer sooner than the sender's own next message, and the token bucket's even traffic at 20/s fell
 * below its target in 2 of 24 seeds without them (`npx tsx bench/sim-seeds.ts 1 24`).
 *
 * @example
 * ```ts
 * relayTargets(held, [{ ...slot, id: 42, c: [9, 0, 2] }], 0, 1, true); // [] (region 2's own count: no news to it)
 * relayTargets(held, [{ ...slot, id: 42, c: [9, 0, 2] }], 0, 1, false); // [2]
 * ```
 */
export function relayTargets(held: readonly Slot[], incoming: readonly Slot[], sender: number, self: number, idle: boolean): number[] {
  const n = incoming[0]?.c.length ?? 0;
  const targets: number[] = [];
  for (let p = 0; p < n; p++) {
    if (p !== sender && p !== self && relayWorthy(held, incoming, sender, idle ? p : undefined)) targets.push(p);
  }
  return targets;
}

/**
 * The peers region `self` gave to between `before` and `after` (its slots before and after a merge): each peer d
 * whose transfer from `self`, summed over the kept windows or epochs, grew.
 *
 * @example
 * ```ts
 * // Region 1 granted region 0 share in epoch 42.
 * granteesOf([{ ...slot, id: 42 }], [{ ...slot, id: 42, x: [[0, 0, 0], [333_333, 0, 0], [0, 0, 0]] }], 1); // [0]
 * ```
 */
export function granteesOf(before: readonly Slot[], after: readonly Slot[], self: number): number[] {
  const given = (slots: readonly Slot[], d: number) => slots.reduce((sum, slot) => (slot.id >= 0 ? sum + slot.x[self]![d]! : sum), 0);
  const n = (after[0] ?? before[0])?.c.length ?? 0;
  const grantees: number[] = [];
  for (let d = 0; d < n; d++) if (d !== self && given(after, d) > given(before, d)) grantees.push(d);
  return grantees;
}

/** The peers a merge's result is marked for: its sender, every other peer, the peers it relays to, its grantees. */
export interface MergeMarks {
  sender: boolean;
  /** Every peer but the sender. */
  others: boolean;
  /** The peers but the sender to which the merge is news (relayTargets). */
  relayTo: readonly number[];
  /** The peers this region gave to in the merge (granteesOf): marked whatever else holds. */
  grantees: readonly number[];
}

/**
 * Whether region `self` admitted anything in `slots` (its count in a kept window or epoch): a region that did not is
 * idle there, and what it gives away concerns only the grantee.
 */
export function admitsIn(slots: readonly Slot[], self: number): boolean {
  return slots.some((slot) => slot.id >= 0 && slot.c[self]! > 0);
}

/**
 * Who hears a merge that changed this region's state. When it gave in it (`grantees`: its own transfers to them grew,
 * a grant or a return): every peer if it admits in the key itself (`admits`, admitsIn: the others' rebalance weighs
 * what the active regions hold), else the grantees alone: an idle donor's grant is not passed on to the others, who
 * hear of it with the next message it sends them (which carries its whole row). Besides, the sender when its view of
 * this region's own row is behind (`ahead`, ownRowAhead) and each other peer to which the merge brought news
 * (`relayTo`, relayTargets). The others do not hear of a merge only because the sender was behind: what this region
 * adds for them (its silent count) is no news the sender brought, and they hear it when this region next talks to
 * them; before this rule the merge went to every peer, and a key that turned loud had each idle donor send the hot
 * region the other's grant again. Until 2026-12-05 every grant went to every peer, and each idle donor told the
 * other of its grant to the hot region (docs/federation.md §2).
 *
 * @example
 * ```ts
 * mergeMarks([0], false, [], false); // an idle donor's grant to region 0: region 0 alone
 * mergeMarks([0], false, [], true); // an active region's grant: every peer (sender and others true)
 * mergeMarks([], true, [], true); // the sender had not seen this region's count: the sender alone
 * mergeMarks([], false, [2], false); // the relay: region 2
 * ```
 */
export function mergeMarks(grantees: readonly number[], ahead: boolean, relayTo: readonly number[], admits: boolean): MergeMarks {
  const broadcast = admits && grantees.length > 0;
  return { sender: broadcast || ahead, others: broadcast, relayTo, grantees };
}

/**
 * The marks of a merge at region `self` of the message `incoming` from region `from`: `held` its slots before the
 * merge, `merged` after (apply_gossip.lua decides the same from the same reads).
 *
 * @example
 * ```ts
 * const marks = marksOfMerge(held, message.slots, merged, message.from, self);
 * const pendingFor = peers.filter((peer) => marksPeer(marks, peer, message.from));
 * ```
 */
export function marksOfMerge(
  held: readonly Slot[],
  incoming: readonly Slot[],
  merged: readonly Slot[],
  from: number,
  self: number,
): MergeMarks {
  const admits = admitsIn(merged, self);
  return mergeMarks(
    granteesOf(held, merged, self),
    ownRowAhead(incoming, merged, self),
    relayTargets(held, incoming, from, self, !admits),
    admits,
  );
}

/** Whether `marks` (a merge of a message from region `from`) names `peer`. */
export function marksPeer(marks: MergeMarks, peer: number, from: number): boolean {
  if (marks.grantees.includes(peer)) return true;
  return peer === from ? marks.sender : marks.others || marks.relayTo.includes(peer);
}

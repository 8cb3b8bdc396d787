// The gossip payload, version 3: one packed string per job (packing.ts characters), lossless for every entry
// apply_gossip.lua takes. What makes it small (docs/scale.md §3.3):
//   - a state key travels as its shard (one character), its 16-character identity hash and its rule as an index
//     into the job's own rule table (each rule name travels once per job, so regions whose rule lists differ still
//     agree on what an index means);
//   - slot cells are sparse, only the non-zero ones (slot-wire.ts);
//   - times are deltas: the entry's change time against the job's sentAt, a slot's t cells against the entry's
//     change time, a window id against the largest id of its rule in the job (the rule table's base).
//
// payload := kind:char from:text to:text fp:fixed16 seq:uint sentAt:uint R:uint (name:text base:uint)^R E:uint entry^E
// entry   := head:uint shard:char hash:fixed16 t slot^slots      (slot: slot-wire.ts)
//              head = (rule·2 + raw)·(KEPT_WINDOWS + 1) + slots; t = raw ? float : int(sentAt − t)
// An entry is `raw` when its change time or a window id is not a small non-negative integer: then those travel as
// floats, so nothing a sender holds is refused by the encoder or rounded on the way; the receiver's range checks
// (message.ts) judge it. Lua mirror: none yet (the worker decodes; apply_gossip.lua takes the entries as before).
import { KEPT_WINDOWS } from '../../protocol/index.ts';
import { keyLayout, type KeyLayout } from '../../keys.ts';
import type { GossipEntry } from '../../store/gossip-calls.ts';
import { MAX_ZIGZAG, PackReader, PackWriter, WireError } from './packing.ts';
import { isDeltaId, readSlot, slotContext, slotLayout, writeSlot, type SlotContext, type SlotLayout } from './slot-wire.ts';

export { WireError };

export type MessageKind = 'gossip' | 'heartbeat' | 'resync';

/** One key's state in a job (apply_gossip.lua takes it as is). */
export type { GossipEntry };

/** A gossip job as both sides hold it in memory (the wire carries its payload: message.ts). */
export interface GossipMessage {
  v: 3;
  kind: MessageKind;
  from: string;
  to: string;
  /** Topology fingerprint of the sender. */
  fp: string;
  /** Per-sender sequence, strictly increasing per publisher and above any earlier one (µs-clock based). */
  seq: number;
  /** Sender's ms time when the job was built. */
  sentAt: number;
  entries: GossipEntry[];
  /** The sender's fingerprint of each rule of the entries (src/federation/rule-identity.ts), by rule name. */
  rules?: Record<string, string> | undefined;
}

/** The header of a payload: everything but the entries. */
export type PayloadHeader = Omit<GossipMessage, 'entries' | 'v' | 'rules'>;

/** More entries than the receiver takes (counted as `oversized`, not `invalid`). */
export class TooManyEntries extends WireError {}

const KINDS: readonly MessageKind[] = ['gossip', 'heartbeat', 'resync'];
const REGION_NAME = /^[a-z0-9-]{1,32}$/;
const RULE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
/** A rule fingerprint (base64url), or '' from a sender that sent none. */
const RULE_FINGERPRINT = /^[A-Za-z0-9_-]{0,16}$/;
// A state key under any prefix: the wire carries its shard, rule and hash, never the prefix (the receiver rebuilds
// the key under its own layout, which every region of a federation shares).
const KEY = /^[A-Za-z0-9_-]{1,32}:\{s(\d{1,2})\}:([A-Za-z0-9_.-]{1,64}):([A-Za-z0-9_-]{16})$/;
const FINGERPRINT_CHARS = 16;
const HASH_CHARS = 16;
/** Rules named in one job's table. */
const MAX_RULES = 4_096;
const SLOT_COUNTS = KEPT_WINDOWS + 1;

/**
 * The payload of `message` for a federation of `n` regions. Throws a RangeError on what no sender produces: a
 * key that is not a state key, a slot of another width, more than KEPT_WINDOWS slots, a negative or fractional
 * seq or sentAt.
 *
 * @example
 * const payload = encodePayload({ v: 3, kind: 'heartbeat', from: 'a', to: 'b', fp, seq: 1, sentAt: Date.now(), entries: [] }, 3);
 */
export function encodePayload(message: GossipMessage, n: number): string {
  const layout = slotLayout(n);
  const out = new PackWriter();
  out.char(KINDS.indexOf(message.kind));
  out.text(message.from);
  out.text(message.to);
  out.fixed(message.fp, FINGERPRINT_CHARS);
  out.uint(message.seq);
  out.uint(message.sentAt);

  // The rule table: each rule once, with the largest window id of its entries as the base of their id deltas.
  const rules = new Map<string, { index: number; base: number }>();
  const parsed = message.entries.map((entry) => {
    const key = KEY.exec(entry.k);
    if (!key) throw new RangeError(`not a state key: ${entry.k}`);
    if (entry.s.length > KEPT_WINDOWS) throw new RangeError(`${entry.s.length} slots in ${entry.k}`);
    for (const slot of entry.s) if (slot.length !== layout.cells + 1) throw new RangeError(`slot width ${slot.length} in ${entry.k}`);
    const name = key[2]!;
    const rule = rules.get(name) ?? { index: rules.size, base: 0 };
    rules.set(name, rule);
    const raw =
      !Number.isSafeInteger(entry.t) ||
      Math.abs(message.sentAt - entry.t) > MAX_ZIGZAG ||
      entry.s.some((slot) => !isDeltaId(slot[0]!, layout));
    if (!raw) for (const slot of entry.s) rule.base = Math.max(rule.base, slot[0]!);
    return { entry, shard: Number(key[1]), hash: key[3]!, rule, raw };
  });
  out.uint(rules.size);
  for (const [name, rule] of rules) {
    out.text(name);
    out.text(message.rules?.[name] ?? '');
    out.uint(rule.base);
  }

  out.uint(parsed.length);
  const context = slotContext();
  for (const { entry, shard, hash, rule, raw } of parsed) {
    out.uint((rule.index * 2 + (raw ? 1 : 0)) * SLOT_COUNTS + entry.s.length);
    out.char(shard);
    out.fixed(hash, HASH_CHARS);
    if (raw) out.float(entry.t);
    else out.int(message.sentAt - entry.t);
    for (const slot of entry.s) writeSlot(out, context, slot, layout, raw ? 0 : entry.t, raw, rule.base);
  }
  return out.toString();
}

/** A payload opened: its header, and its entries read on demand (they need the receiver's region count). */
export interface OpenedPayload {
  header: PayloadHeader;
  /** The sender's rule fingerprints, by rule name: filled by `entries()`. */
  rules: Record<string, string>;
  /**
   * The entries for `n` regions, their state keys under `keys` (the receiver's layout; the default prefix when
   * omitted); throws a WireError (TooManyEntries above `maxEntries`).
   */
  entries(n: number, maxEntries: number, keys?: KeyLayout): GossipEntry[];
}

/**
 * Reads a payload's header; the entries are read by `entries()`. Throws a WireError on a malformed header.
 *
 * @example
 * const { header, entries } = openPayload(payload);
 * if (header.to === 'b') console.log(entries(3, 5_000).length);
 */
export function openPayload(payload: string): OpenedPayload {
  const input = new PackReader(payload);
  const kind = KINDS[input.char()];
  if (kind === undefined) throw new WireError('unknown message kind');
  const header: PayloadHeader = {
    kind,
    from: input.text(32, REGION_NAME),
    to: input.text(32, REGION_NAME),
    fp: input.fixed(FINGERPRINT_CHARS),
    seq: input.uint(),
    sentAt: input.uint(),
  };
  const fingerprints: Record<string, string> = {};
  return {
    header,
    rules: fingerprints,
    entries: (n, maxEntries, keys = keyLayout()) => readEntries(input, header, slotLayout(n), maxEntries, fingerprints, keys),
  };
}

function readEntries(
  input: PackReader,
  header: PayloadHeader,
  layout: SlotLayout,
  maxEntries: number,
  fingerprints: Record<string, string>,
  keys: KeyLayout,
): GossipEntry[] {
  const ruleCount = input.uint();
  if (ruleCount > MAX_RULES) throw new WireError(`${ruleCount} rules in one job`);
  const rules: { name: string; base: number }[] = [];
  for (let i = 0; i < ruleCount; i++) {
    const name = input.text(64, RULE_NAME);
    const fingerprint = input.text(16, RULE_FINGERPRINT);
    if (fingerprint !== '') fingerprints[name] = fingerprint;
    rules.push({ name, base: input.uint() });
  }
  const count = input.uint();
  if (count > maxEntries) throw new TooManyEntries(`${count} entries (at most ${maxEntries})`);
  const entries: GossipEntry[] = [];
  const context: SlotContext = slotContext();
  for (let e = 0; e < count; e++) {
    const head = input.uint();
    const slots = head % SLOT_COUNTS;
    const raw = Math.floor(head / SLOT_COUNTS) % 2 === 1;
    const rule = rules[Math.floor(head / SLOT_COUNTS / 2)];
    if (rule === undefined) throw new WireError(`entry ${e}: rule index outside the job's table`);
    const shard = input.char();
    const k = keys.stateKey(shard, rule.name, input.fixed(HASH_CHARS));
    const t = raw ? input.float() : header.sentAt - input.int();
    const s: number[][] = [];
    for (let j = 0; j < slots; j++) s.push(readSlot(input, context, layout, raw ? 0 : t, raw, rule.base));
    entries.push({ k, t, s });
  }
  input.end();
  return entries;
}

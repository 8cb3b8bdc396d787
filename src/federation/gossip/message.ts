// The gossip job: what one region sends another, how it is signed, and every check a receiver makes before a
// single counter is touched. Anyone who can write to a region's Redis can add a BullMQ job, so a job is
// trusted only when its HMAC (over a canonical encoding, with the federation secret) verifies.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { KEY_SHARDS, STATE_KEY_PATTERN, shardOfKey } from '../../keys.ts';
import { KEPT_WINDOWS, type Topology } from '../../protocol/index.ts';
import { slotLength, timeCellsOffset } from './cells.ts';
import type { GossipEntry } from '../../store/gossip-calls.ts';

/** 2: slots carry the t cells (last admission time per region). */
export const MESSAGE_VERSION = 2;

/** Hard bounds, independent of config, so a misconfigured sender cannot make valid gossip unacceptable. */
export const LIMITS = {
  /** Entries (keys) per job; the sender sends min(maxBatchKeys, this). */
  maxEntries: 5_000,
  /** JSON bytes per job; the sender splits larger batches. */
  maxBytes: 4 * 1024 * 1024,
  /** Cumulative counts, transfers and share units above this are nonsense (the limit itself is ≤ 1e9). */
  maxCount: 1e12,
  /** Window ids and ms timestamps (ms since the epoch stays below 1e14 for three thousand years). */
  maxTime: 1e14,
} as const;

export type MessageKind = 'gossip' | 'heartbeat' | 'resync';

/** One key's state in a job (apply_gossip.lua takes it as is). */
export type { GossipEntry };

export interface GossipMessage {
  v: typeof MESSAGE_VERSION;
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
  /** Hex HMAC-SHA256 of canonical(message) with federation.secret; absent when no secret is configured. */
  mac?: string | undefined;
}

const Entry = z.strictObject({
  k: z.string().max(200).regex(STATE_KEY_PATTERN),
  t: z.number(),
  s: z.array(z.array(z.number()).max(1 + 4 * 64 * 64)).max(KEPT_WINDOWS),
});

const Message = z.strictObject({
  v: z.literal(MESSAGE_VERSION),
  kind: z.enum(['gossip', 'heartbeat', 'resync']),
  from: z.string().max(64),
  to: z.string().max(64),
  fp: z.string().max(64),
  seq: z.number(),
  sentAt: z.number(),
  entries: z.array(Entry).max(LIMITS.maxEntries),
  mac: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
});

/** Field order fixed by construction, so both sides hash the same bytes whatever JSON key order a job had. */
export function canonical(message: GossipMessage): string {
  return JSON.stringify([
    message.v,
    message.kind,
    message.from,
    message.to,
    message.fp,
    message.seq,
    message.sentAt,
    message.entries.map((entry) => [entry.k, entry.t, entry.s]),
  ]);
}

export function macOf(message: GossipMessage, secret: string): string {
  return createHmac('sha256', secret).update(canonical(message), 'utf8').digest('hex');
}

export function sign(message: GossipMessage, secret: string | undefined): GossipMessage {
  return secret === undefined ? message : { ...message, mac: macOf(message, secret) };
}

export type RejectReason =
  | 'oversized'
  | 'invalid'
  | 'bad_mac'
  | 'unknown_region'
  | 'wrong_destination'
  | 'fingerprint'
  | 'out_of_range'
  | 'replayed';

export type Verdict =
  | { ok: true; message: GossipMessage; senderIndex: number }
  | { ok: false; reason: RejectReason; from: string | undefined; detail: string };

const isCount = (value: number) => Number.isInteger(value) && value >= 0 && value <= LIMITS.maxCount;
const isTime = (value: number) => Number.isInteger(value) && value >= 0 && value <= LIMITS.maxTime;
/** The `a` cells carry, for token buckets, the tokens moved with share (y, fractional); windows send integers. */
const isAmount = (value: number) => Number.isFinite(value) && value >= 0 && value <= LIMITS.maxCount;

function rangeProblem(message: GossipMessage, n: number): string | undefined {
  if (!Number.isSafeInteger(message.seq) || message.seq < 0) return 'seq';
  if (!isTime(message.sentAt)) return 'sentAt';
  const width = slotLength(n);
  const times = timeCellsOffset(n);
  const amounts = 1 + n + n * n; // slot layout: id, c[n], x[n·n], a[n·n], t[n]
  for (const entry of message.entries) {
    if (shardOfKey(entry.k) >= KEY_SHARDS) return `shard of ${entry.k}`;
    if (!isTime(entry.t)) return `t of ${entry.k}`;
    for (const slot of entry.s) {
      if (slot.length !== width) return `slot width of ${entry.k}`;
      if (!isTime(slot[0]!)) return `window id of ${entry.k}`;
      for (let i = 1; i < amounts; i++) if (!isCount(slot[i]!)) return `cell ${i} of ${entry.k}`;
      for (let i = amounts; i < times; i++) if (!isAmount(slot[i]!)) return `cell ${i} of ${entry.k}`;
      for (let i = times; i < width; i++) if (!isTime(slot[i]!)) return `time cell ${i} of ${entry.k}`;
    }
  }
  return undefined;
}

function macMatches(message: GossipMessage, secret: string): boolean {
  if (message.mac === undefined) return false;
  return timingSafeEqual(Buffer.from(message.mac, 'hex'), Buffer.from(macOf(message, secret), 'hex'));
}

/**
 * Every check but replay (which needs Redis): size, shape, signature, sender, destination, topology, ranges.
 * `bytes` is the job's JSON size.
 */
export function verify(data: unknown, bytes: number, topology: Topology, self: string, secret: string | undefined): Verdict {
  const claimed = typeof (data as { from?: unknown } | null)?.from === 'string' ? (data as { from: string }).from : undefined;
  const from = claimed !== undefined && topology.regions.includes(claimed) ? claimed : undefined;
  if (bytes > LIMITS.maxBytes) return { ok: false, reason: 'oversized', from, detail: `${bytes} bytes` };
  const parsed = Message.safeParse(data);
  if (!parsed.success) {
    const tooMany = parsed.error.issues.some((issue) => issue.code === 'too_big' && issue.origin === 'array');
    return { ok: false, reason: tooMany ? 'oversized' : 'invalid', from, detail: z.prettifyError(parsed.error).slice(0, 500) };
  }
  const message = parsed.data as GossipMessage;
  if (secret !== undefined && !macMatches(message, secret))
    return { ok: false, reason: 'bad_mac', from, detail: message.mac ? 'MAC mismatch' : 'unsigned' };
  const senderIndex = topology.regions.indexOf(message.from);
  if (senderIndex < 0 || message.from === self) return { ok: false, reason: 'unknown_region', from, detail: message.from };
  if (message.to !== self) return { ok: false, reason: 'wrong_destination', from, detail: message.to };
  if (message.fp !== topology.fingerprint) return { ok: false, reason: 'fingerprint', from, detail: message.fp };
  const problem = rangeProblem(message, topology.regions.length);
  if (problem !== undefined) return { ok: false, reason: 'out_of_range', from, detail: problem };
  return { ok: true, message, senderIndex };
}

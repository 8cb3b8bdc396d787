// The gossip job: what one region sends another, how it is signed, and every check a receiver makes before a
// single counter is touched. Anyone who can write to a region's Redis can add a BullMQ job, so a job is
// trusted only when its HMAC (over the payload's bytes, with the federation secret) verifies.
//
// A job's data is `{ v: 3, p: <payload>, m?: <mac> }` (BullMQ stores it as JSON): the payload is the packed
// string of wire.ts, the MAC HMAC-SHA256 of the version and the payload truncated to 16 bytes, in base64url. A
// job of any other version is refused as `version` and never read further: regions on different versions do not
// merge each other's state, as under a fingerprint mismatch (each spends only its own allowance).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { KEY_SHARDS, shardOfKey, type KeyLayout } from '../../keys.ts';
import type { Topology } from '../../protocol/index.ts';
import { slotLength, timeCellsOffset } from './cells.ts';
import {
  encodePayload,
  openPayload,
  TooManyEntries,
  WireError,
  type GossipEntry,
  type GossipMessage,
  type MessageKind,
  type PayloadHeader,
} from './wire.ts';

export type { GossipEntry, GossipMessage, MessageKind };

/** 3: the packed payload of wire.ts (2 was JSON with every cell; 1 had no t cells). */
export const MESSAGE_VERSION = 3;

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

/** A gossip job's data as BullMQ stores it. */
export interface GossipJob {
  v: typeof MESSAGE_VERSION;
  /** The packed payload (wire.ts). */
  p: string;
  /** base64url of the first 16 bytes of HMAC-SHA256(secret, version and payload); absent without a secret. */
  m?: string;
}

const Job = z.strictObject({
  v: z.literal(MESSAGE_VERSION),
  p: z.string().max(LIMITS.maxBytes),
  m: z
    .string()
    .regex(/^[A-Za-z0-9_-]{22}$/)
    .optional(),
});

/** The MAC of a payload: the version byte and the payload's UTF-8 bytes, HMAC-SHA256, first 16 bytes. */
export function macOf(payload: string, secret: string): string {
  return createHmac('sha256', secret)
    .update(Uint8Array.of(MESSAGE_VERSION))
    .update(payload, 'utf8')
    .digest()
    .subarray(0, 16)
    .toString('base64url');
}

/**
 * The job data of `message` for a federation of `n` regions, signed when a secret is given.
 *
 * @example
 * const job = encodeJob({ v: 3, kind: 'heartbeat', from: 'a', to: 'b', fp: topology.fingerprint, seq: 1, sentAt: Date.now(), entries: [] }, 3, secret);
 * await queue.add('heartbeat', job);
 */
export function encodeJob(message: GossipMessage, n: number, secret: string | undefined): GossipJob {
  const p = encodePayload(message, n);
  return secret === undefined ? { v: MESSAGE_VERSION, p } : { v: MESSAGE_VERSION, p, m: macOf(p, secret) };
}

/**
 * Reads a job's message without checking its signature or ranges (tests and forensics; the worker uses verify).
 * Throws on data that is not a v3 job.
 *
 * @example
 * const message = readJob(job.data, topology.regions.length);
 */
export function readJob(data: unknown, n: number, keys?: KeyLayout): GossipMessage {
  const job = Job.parse(data);
  const { header, entries, rules } = openPayload(job.p);
  const list = entries(n, LIMITS.maxEntries, keys);
  return { v: MESSAGE_VERSION, ...header, entries: list, rules };
}

export type RejectReason =
  | 'oversized'
  | 'invalid'
  | 'version'
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

function macMatches(job: z.infer<typeof Job>, secret: string): boolean {
  if (job.m === undefined) return false;
  return timingSafeEqual(Buffer.from(job.m, 'utf8'), Buffer.from(macOf(job.p, secret), 'utf8'));
}

/** The version a job claims, when it is not this one (a v2 job is a JSON object with `v: 2`). */
function otherVersion(data: unknown): number | undefined {
  const v = (data as { v?: unknown } | null)?.v;
  return typeof v === 'number' && v !== MESSAGE_VERSION ? v : undefined;
}

/** The sender a job names, for counting its rejection; only a region of the topology, never what it claims. */
function claimedSender(data: unknown, header: PayloadHeader | undefined, topology: Topology): string | undefined {
  const legacy = (data as { from?: unknown } | null)?.from;
  const claimed = header?.from ?? (typeof legacy === 'string' ? legacy : undefined);
  return claimed !== undefined && topology.regions.includes(claimed) ? claimed : undefined;
}

const wireDetail = (error: unknown) => (error instanceof WireError ? error.message : String(error)).slice(0, 500);

/**
 * Every check but replay (which needs Redis): size, version, shape, signature, sender, destination, topology,
 * then the entries' shape and ranges. `bytes` is the job's JSON size. The entries' state keys are rebuilt under
 * `keys`, this region's layout (the default prefix when omitted). Never throws.
 *
 * @example
 * const verdict = verify(job.data, bytes, topology, 'b', config.federation.secret);
 * if (!verdict.ok) metrics.rejected.inc({ reason: verdict.reason });
 */
export function verify(
  data: unknown,
  bytes: number,
  topology: Topology,
  self: string,
  secret: string | undefined,
  keys?: KeyLayout,
): Verdict {
  const reject = (reason: RejectReason, detail: string, header?: PayloadHeader): Verdict => ({
    ok: false,
    reason,
    from: claimedSender(data, header, topology),
    detail,
  });
  if (bytes > LIMITS.maxBytes) return reject('oversized', `${bytes} bytes`);
  const version = otherVersion(data);
  if (version !== undefined) return reject('version', `message version ${version}, this region reads ${MESSAGE_VERSION}`);
  const parsed = Job.safeParse(data);
  if (!parsed.success) {
    const tooBig = parsed.error.issues.some((issue) => issue.code === 'too_big');
    return reject(tooBig ? 'oversized' : 'invalid', z.prettifyError(parsed.error).slice(0, 500));
  }
  const job = parsed.data;
  let opened: ReturnType<typeof openPayload>;
  try {
    opened = openPayload(job.p);
  } catch (error) {
    return reject('invalid', `header: ${wireDetail(error)}`);
  }
  const { header } = opened;
  if (secret !== undefined && !macMatches(job, secret)) return reject('bad_mac', job.m ? 'MAC mismatch' : 'unsigned', header);
  const senderIndex = topology.regions.indexOf(header.from);
  if (senderIndex < 0 || header.from === self) return reject('unknown_region', header.from, header);
  if (header.to !== self) return reject('wrong_destination', header.to, header);
  if (header.fp !== topology.fingerprint) return reject('fingerprint', header.fp, header);
  const n = topology.regions.length;
  let entries: GossipEntry[];
  try {
    entries = opened.entries(n, LIMITS.maxEntries, keys);
  } catch (error) {
    return reject(error instanceof TooManyEntries ? 'oversized' : 'invalid', `entries: ${wireDetail(error)}`, header);
  }
  const message: GossipMessage = { v: MESSAGE_VERSION, ...header, entries, rules: opened.rules };
  const problem = rangeProblem(message, n);
  if (problem !== undefined) return reject('out_of_range', problem, header);
  return { ok: true, message, senderIndex };
}

// The typed calls of the federation's scripts: apply_gossip.lua (merge a peer's entry), sweep_watch.lua
// (rebalance watched keys), take_pending.lua / ack_pending.lua (what to send a peer), screen_gossip.lua
// (refuse oversized queued jobs). Each builder lays out KEYS and ARGV as its script documents them.
import { Cluster } from 'ioredis';
import type { Config, Rule } from '../config/schema.ts';
import { shardOfKey, type KeyLayout } from '../keys.ts';
import { REBALANCE, type RebalancePolicy } from '../protocol/index.ts';
import { scriptBudget, type Topology } from '../protocol/index.ts';
import type { QuotafedCommands, ScriptedRedis } from './commands.ts';
import { functionsOrScripts, type FunctionsOrScripts } from './functions-mode.ts';
import { gossipLibrary } from './library.ts';
import { arrayReply, integerReply, numberAt, unexpected } from './replies.ts';
import { ALGORITHM_CODES, runScript, type ScriptCall } from './script-call.ts';

/** One key's state as gossip carries it, and as apply_gossip.lua takes it. */
export interface GossipEntry {
  /** State key. */
  k: string;
  /** Sender's ms time of the key's last change (sync-lag measurement). */
  t: number;
  /** Flattened slots (see federation/gossip/cells.ts): id, c[n], x[n·n], a[n·n], t[n]. */
  s: number[][];
}

/** REBALANCE as apply_gossip.lua and sweep_watch.lua take it (five values, protocol.ts order). */
export function policyArgs(policy: RebalancePolicy = REBALANCE): number[] {
  return [policy.hungerFraction, policy.reserveFraction, policy.giveFraction, policy.minSurplus, policy.idleMs];
}

/** A rule as apply_gossip.lua and sweep_watch.lua take it: algorithm, limit, period, capacity, budget. */
export function ruleArgs(rule: Rule, fallbackBudget: Config['federation']['leakageBudget'], regions: number): (string | number)[] {
  return [ALGORITHM_CODES[rule.algorithm], rule.limit, rule.period, rule.burst ?? rule.limit, scriptBudget(rule, fallbackBudget, regions)];
}

/** The federation's part of the apply_gossip and sweep_watch calls: self index, region count, share units, skew. */
function federationArgs(topology: Topology): (string | number)[] {
  return [topology.selfIndex, topology.regions.length, topology.unitsCsv, topology.maxClockSkewMs];
}

/** A shard's pending sets, one per peer, in peer index order. */
function pendingKeys(keys: KeyLayout, topology: Topology, shard: number): string[] {
  return topology.peerIndexes.map((peer) => keys.peerPendingKey(shard, peer));
}

// ---- apply_gossip.lua ------------------------------------------------------------------------------------

/**
 * The apply_gossip.lua call for one entry, under the region's key layout (layoutOf(config): the wire rebuilt the
 * entry's key under it; its marker depends on the kind of Redis). `now` pins the clock (tests); `policy` defaults
 * to REBALANCE.
 */
export function applyGossipCall(
  layout: KeyLayout,
  topology: Topology,
  rule: Rule,
  fallbackBudget: Config['federation']['leakageBudget'],
  senderIndex: number,
  entry: GossipEntry,
  options: { now?: number; policy?: RebalancePolicy } = {},
): ScriptCall {
  const shard = shardOfKey(entry.k);
  const n = topology.regions.length;
  const keys = [
    entry.k,
    layout.shardMarkerKey(shard),
    layout.watchSetKey(shard),
    layout.fastSetKey(shard),
    layout.bellKey(shard),
    ...pendingKeys(layout, topology, shard),
  ];
  const args: (string | number)[] = [
    ...federationArgs(topology),
    ...ruleArgs(rule, fallbackBudget, n),
    ...policyArgs(options.policy),
    senderIndex,
    options.now ?? '',
    entry.t,
    entry.s.length,
  ];
  for (const slot of entry.s) for (const value of slot) args.push(value);
  return { keys, args };
}

/** apply_gossip.lua's reply, parsed. */
export interface ApplyGossipReply {
  /** The merge changed the key's state. */
  changed: boolean;
  /** This region's clock minus the sender's change time (ms; negative under skew). */
  lagMs: number;
  /** The merge's rebalance gave allowance to a peer (the key went on the fast lane). */
  granted: boolean;
  /**
   * The lanes the merge gave the publisher work in, as a bell's mask (lua/includes/bell.lua: bit 0 the fast lane,
   * bit 1 the watch sweep, bit 2 + d the round to peer d; -1 every lane; 0 none), whether it rang the bell or not.
   */
  lanes: number;
  /**
   * A quiet job's grant handed to the in-process publisher (apply_job.lua hand_over): the key's HGETALL, the key
   * taken off its fast-lane set. On the last reply of each key a quiet job granted in only.
   */
  handed?: string[];
}

/** apply_gossip.lua's reply: { changed 0|1, now - sender time, granted 0|1, lanes[, HGETALL of a key handed over] }. */
export function parseApplyGossipReply(raw: unknown): ApplyGossipReply {
  const reply = arrayReply('apply_gossip', raw, 4);
  const parsed: ApplyGossipReply = {
    changed: numberAt('apply_gossip', raw, reply[0]) === 1,
    lagMs: numberAt('apply_gossip', raw, reply[1]),
    granted: numberAt('apply_gossip', raw, reply[2]) === 1,
    lanes: numberAt('apply_gossip', raw, reply[3]),
  };
  if (reply.length > 4) {
    if (!Array.isArray(reply[4])) throw unexpected('apply_gossip', 'the handed key as { field, value, ... }', raw);
    parsed.handed = (reply[4] as unknown[]).map(String);
  }
  return parsed;
}

// One loader per client: the gossip library is loaded once per connection's server, not per call.
const gossipFunctions = new WeakMap<ScriptedRedis, FunctionsOrScripts>();

/** The gossip library's runner on this client (loaded once per client). */
function gossipFunctionsOf(redis: ScriptedRedis): FunctionsOrScripts {
  let run = gossipFunctions.get(redis);
  if (run === undefined) {
    run = functionsOrScripts(redis, gossipLibrary().source);
    gossipFunctions.set(redis, run);
  }
  return run;
}

/** Sends an apply_gossip.lua call and parses its reply. */
export async function runApplyGossip(redis: ScriptedRedis, call: ScriptCall): Promise<ApplyGossipReply> {
  const { applyFn } = gossipLibrary();
  const reply = await gossipFunctionsOf(redis)(
    () => redis.fcall(applyFn, call.keys.length, ...call.keys, ...call.args),
    () => runScript(redis, 'applyGossip', call),
  );
  return parseApplyGossipReply(reply);
}

// ---- sweep_watch.lua -------------------------------------------------------------------------------------

/** The sweep_watch.lua call for watched keys of one shard. `now` pins the clock (tests). */
export function sweepCall(
  layout: KeyLayout,
  topology: Topology,
  shard: number,
  watched: readonly { key: string; rule: Rule }[],
  fallbackBudget: Config['federation']['leakageBudget'],
  options: { now?: number; policy?: RebalancePolicy; strandedHorizonMs?: number } = {},
): ScriptCall {
  const n = topology.regions.length;
  const keys = [layout.watchSetKey(shard), layout.shardMarkerKey(shard), layout.bellKey(shard), ...pendingKeys(layout, topology, shard)];
  const args: (string | number)[] = [
    ...federationArgs(topology),
    ...policyArgs(options.policy),
    options.now ?? '',
    watched.length,
    options.strandedHorizonMs ?? 0,
  ];
  for (const { key, rule } of watched) {
    keys.push(key);
    args.push(...ruleArgs(rule, fallbackBudget, n));
  }
  return { keys, args };
}

/** sweep_watch.lua's reply, parsed. */
export interface SweepReply {
  /** Keys rebalanced by this sweep. */
  rebalanced: number;
  /** Keys that left the watch set (no hungry peer any more). */
  unwatched: number;
  /**
   * Per watched key, in call order: this region's unused allowance in a window that ends within the stranded
   * horizon while a peer is hungry (allowance stranded at window end); 0 otherwise.
   */
  stranded: number[];
  /**
   * How long (ms) no sweep of these keys changes anything unless a merge changes one of them, which rings the watch
   * lane (protocol.ts bucketSweepIdleUntil: the least of the idle holders' spans); 0 when a key needs the next round's.
   */
  quietForMs: number;
}

/** sweep_watch.lua's reply: { keys rebalanced, keys that left the watch set, { stranded per key }, quiet for ms }. */
export function parseSweepReply(raw: unknown): SweepReply {
  const reply = arrayReply('sweep_watch', raw, 4);
  const stranded = arrayReply('sweep_watch', reply[2], 0).map((value) => numberAt('sweep_watch', raw, value));
  return {
    rebalanced: numberAt('sweep_watch', raw, reply[0]),
    unwatched: numberAt('sweep_watch', raw, reply[1]),
    stranded,
    quietForMs: numberAt('sweep_watch', raw, reply[3]),
  };
}

/** Sends a sweep_watch.lua call (a function of the gossip library where the server runs Functions) and parses its reply. */
export async function runSweepWatch(redis: ScriptedRedis, call: ScriptCall): Promise<SweepReply> {
  const { sweepFn } = gossipLibrary();
  const reply = await gossipFunctionsOf(redis)(
    () => redis.fcall(sweepFn, call.keys.length, ...call.keys, ...call.args),
    () => runScript(redis, 'sweepWatch', call),
  );
  return parseSweepReply(reply);
}

// ---- take_pending.lua / ack_pending.lua ------------------------------------------------------------------

/** Reads up to `most` pending keys of one shard for one peer: KEYS the pending set; ARGV most. */
export function takePendingCall(layout: KeyLayout, shard: number, peer: number, most: number): ScriptCall {
  return { keys: [layout.peerPendingKey(shard, peer)], args: [most] };
}

/** One key take_pending.lua answered. */
export interface PendingKey {
  key: string;
  /** The version the key was marked pending at (ack_pending.lua forgets it only at this version). */
  version: string;
  /** HGETALL of the key (field, value, ...); empty when it expired. */
  fields: string[];
}

/** take_pending.lua's reply: the set's size, then { key, version, HGETALL } per key read. */
export function parseTakePendingReply(raw: unknown): TakenPending {
  const reply = arrayReply('take_pending', raw);
  if (reply.length !== 2 || typeof reply[0] !== 'number' || !Array.isArray(reply[1]))
    throw unexpected('take_pending', '{ pending, { { key, version, fields } per key } }', raw);
  const keys = (reply[1] as unknown[]).map((item) => {
    if (!Array.isArray(item) || item.length < 3 || !Array.isArray(item[2]))
      throw unexpected('take_pending', '{ key, version, fields } per key', raw);
    return { key: String(item[0]), version: String(item[1]), fields: item[2] as string[] };
  });
  return { pending: reply[0], keys };
}

/** What take_pending.lua read of one shard's pending set: how many keys it held, and the oldest ones with their state. */
export interface TakenPending {
  pending: number;
  keys: PendingKey[];
}

/** Sends a take_pending.lua call and parses its reply. */
export async function runTakePending(redis: ScriptedRedis, call: ScriptCall): Promise<TakenPending> {
  return parseTakePendingReply(await runScript(redis, 'takePending', call));
}

/** Pops up to `most` keys of one shard's fast-lane set with their state: KEYS the fast-lane set; ARGV most. */
export function takeFastCall(layout: KeyLayout, shard: number, most: number): ScriptCall {
  return { keys: [layout.fastSetKey(shard)], args: [most] };
}

/** One key take_fast.lua popped: its HGETALL, empty when it expired or is a silent string now. */
export interface FastKey {
  key: string;
  fields: string[];
}

/** take_fast.lua's reply: { key, HGETALL } per key popped. */
export function parseTakeFastReply(raw: unknown): FastKey[] {
  return arrayReply('take_fast', raw).map((item) => {
    if (!Array.isArray(item) || item.length < 2 || !Array.isArray(item[1])) throw unexpected('take_fast', '{ key, fields } per key', raw);
    return { key: String(item[0]), fields: item[1] as string[] };
  });
}

/** Sends a take_fast.lua call and parses its reply. */
export async function runTakeFast(redis: ScriptedRedis, call: ScriptCall): Promise<FastKey[]> {
  return parseTakeFastReply(await runScript(redis, 'takeFast', call));
}

/** Pops every rung bell at once: KEYS the shards' bells in shard order (keys.ts bellKey). A single Redis only. */
export function drainBellsCall(bells: readonly string[]): ScriptCall {
  return { keys: [...bells], args: [] };
}

/** One bell drain_bells.lua popped: its key and its elements (lua/includes/bell.lua). */
export interface DrainedBell {
  bell: string;
  elements: string[];
}

/** drain_bells.lua's reply: { bell, { element, ... } } per bell that held an element (LMPOP's reply). */
export function parseDrainBellsReply(raw: unknown): DrainedBell[] {
  return arrayReply('drain_bells', raw).map((item) => {
    if (!Array.isArray(item) || item.length < 2 || !Array.isArray(item[1]))
      throw unexpected('drain_bells', '{ bell, elements } per bell', raw);
    return { bell: String(item[0]), elements: (item[1] as unknown[]).map(String) };
  });
}

/** Sends a drain_bells.lua call and parses its reply. */
export async function runDrainBells(redis: Pick<QuotafedCommands, 'drainBells'>, call: ScriptCall): Promise<DrainedBell[]> {
  return parseDrainBellsReply(await runScript(redis, 'drainBells', call));
}

/** Forgets sent keys still at the version sent: KEYS the pending set; ARGV key, version, key, version, ... */
export function ackPendingCall(
  layout: KeyLayout,
  shard: number,
  peer: number,
  sent: readonly { key: string; version: string }[],
): ScriptCall {
  const args: string[] = [];
  for (const { key, version } of sent) args.push(key, version);
  return { keys: [layout.peerPendingKey(shard, peer)], args };
}

/** The number of keys forgotten. */
export async function runAckPending(redis: ScriptedRedis, call: ScriptCall): Promise<number> {
  return integerReply('ack_pending', await runScript(redis, 'ackPending', call));
}

// ---- screen_gossip.lua -----------------------------------------------------------------------------------

/** What screen_gossip.lua looks at: one gossip queue's lists and the bounds of a job. */
export interface ScreenInputs {
  /** The queue's wait list and failed set. */
  waitKey: string;
  failedKey: string;
  /** The queue's delayed and prioritized sets (a take may find a job there too), and its marker. */
  delayedKey: string;
  prioritizedKey: string;
  markerKey: string;
  /** The queue's job key prefix. */
  jobPrefix: string;
  maxBytes: number;
  /** Jobs at the tail of the wait list to look at. */
  depth: number;
  now: number;
}

/** What screen_gossip.lua did: the jobs it failed, and whether a take may find a job. */
export interface ScreenOutcome {
  refused: { id: string; bytes: number }[];
  /** A job waits, is delayed or is prioritized: BullMQ's take may find one (false: it would find none). */
  takeable: boolean;
}

/**
 * Fails queued gossip jobs whose data is oversized, and drops a marker no job stands behind: KEYS wait, failed,
 * delayed, prioritized, marker; ARGV prefix, most bytes, depth, now.
 */
export function screenGossipCall(input: ScreenInputs): ScriptCall {
  return {
    keys: [input.waitKey, input.failedKey, input.delayedKey, input.prioritizedKey, input.markerKey],
    args: [input.jobPrefix, input.maxBytes, input.depth, input.now],
  };
}

/** screen_gossip.lua's reply: takeable (1 or 0), then id, size, id, size, ... of the jobs it failed. */
export function parseScreenGossipReply(raw: unknown): ScreenOutcome {
  const reply = arrayReply('screen_gossip', raw);
  if (reply.length % 2 !== 1) throw unexpected('screen_gossip', 'takeable, then id, size pairs', raw);
  const refused: { id: string; bytes: number }[] = [];
  for (let i = 1; i < reply.length; i += 2) refused.push({ id: String(reply[i]), bytes: numberAt('screen_gossip', raw, reply[i + 1]) });
  return { refused, takeable: numberAt('screen_gossip', raw, reply[0]) === 1 };
}

/** Sends a screen_gossip.lua call (on a client with only that script registered) and parses its reply. */
export async function runScreenGossip(redis: Pick<QuotafedCommands, 'screenGossip'>, call: ScriptCall): Promise<ScreenOutcome> {
  return parseScreenGossipReply(await runScript(redis, 'screenGossip', call));
}

// ---- replay_check.lua, replay_record.lua -------------------------------------------------------------------

/** A replay record call: KEYS the sender's record; ARGV the job's sequence number, the numbers kept. */
export function replayCall(recordKey: string, seq: number, retained: number): ScriptCall {
  return { keys: [recordKey], args: [String(seq), retained] };
}

/** Sends a replay_check.lua call: true when the job was applied already (or cannot be told from one). */
export async function runReplayCheck(redis: Pick<QuotafedCommands, 'replayCheck'>, call: ScriptCall): Promise<boolean> {
  return integerReply('replay_check', await runScript(redis, 'replayCheck', call)) === 1;
}

/** Sends a replay_record.lua call: the job is recorded, the record trimmed to the numbers kept. */
export async function runReplayRecord(redis: Pick<QuotafedCommands, 'replayRecord'>, call: ScriptCall): Promise<void> {
  integerReply('replay_record', await runScript(redis, 'replayRecord', call));
}

// ---- one gossip job (includes/apply_job.lua in the gossip library) ----------------------------------------

/** What a job's call writes beside its entries' merges: the replay record and the heard mark. */
export interface JobRecord {
  /** The sender's replay record (KeyLayout.replayKey) and the job's sequence number in it. */
  replayKey: string;
  seq: number;
  /** How many numbers the record keeps (replay.ts RETAINED). */
  retained: number;
  /** The region's meta hash, the sender's heard field in it and the time it records (ms). */
  metaKey: string;
  heardField: string;
  heardAt: number;
}

/** A job's outcome: a replay (nothing written), or every entry's merge reply in entry order. */
export type ApplyJobReply = { replayed: true } | { replayed: false; replies: ApplyGossipReply[] };

/**
 * Entries merged in one call of a job: a long job (up to LIMITS.maxEntries) goes in parts, so no call holds Redis
 * much longer than a pipeline of single merges did before other clients are served again.
 */
export const JOB_PART_ENTRIES = 16;

/**
 * The job function's call: KEYS the record and meta keys, then each entry's apply_gossip keys; ARGV the record's
 * arguments, whether this part checks the record first and records the job after (the first and the last part),
 * whether its merges leave the bells as they are (`quiet`), the entry count, then per entry its key count,
 * argument count and arguments (apply_job.lua).
 */
export function applyJobCall(
  record: JobRecord,
  entries: readonly ScriptCall[],
  part: { check: boolean; record: boolean; quiet?: boolean },
): ScriptCall {
  const keys = [record.replayKey, record.metaKey];
  const args: (string | number)[] = [
    String(record.seq),
    record.retained,
    record.heardField,
    record.heardAt,
    part.check ? 1 : 0,
    part.record ? 1 : 0,
    part.quiet === true ? 1 : 0,
    entries.length,
  ];
  for (const entry of entries) {
    keys.push(...entry.keys);
    args.push(entry.keys.length, entry.args.length, ...entry.args);
  }
  return { keys, args };
}

/** apply_job.lua's reply: { 1 } for a replay, else { 0, apply_gossip reply per entry }. */
export function parseApplyJobReply(raw: unknown, entries: number): ApplyJobReply {
  const reply = arrayReply('apply_job', raw, 1);
  if (numberAt('apply_job', raw, reply[0]) === 1) return { replayed: true };
  if (reply.length !== entries + 1) throw unexpected('apply_job', `${entries} entry replies`, raw);
  return { replayed: false, replies: reply.slice(1).map(parseApplyGossipReply) };
}

/** The job as separate calls, in the job function's order: check, merges, then record and heard mark together. */
async function applyJobInSteps(redis: ScriptedRedis, record: JobRecord, entries: readonly ScriptCall[]): Promise<ApplyJobReply> {
  const replay = replayCall(record.replayKey, record.seq, record.retained);
  if (await runReplayCheck(redis, replay)) return { replayed: true };
  const replies = await Promise.all(entries.map((call) => runApplyGossip(redis, call)));
  await Promise.all([runReplayRecord(redis, replay), redis.hset(record.metaKey, record.heardField, record.heardAt)]);
  return { replayed: false, replies };
}

/**
 * Applies one gossip job: its replay check, each entry's apply_gossip call (applyGossipCall) in order, then its
 * replay record and heard mark. One FCALL where the server runs Functions (one per JOB_PART_ENTRIES entries for a
 * long job: the first checks, the last records); on a Redis Cluster (the entries' keys hash to several slots) or
 * without Functions, the same steps as separate calls. `quiet`: the merges leave the shards' bells as they are
 * (the caller marks the lanes of each reply itself) and hand the keys they granted in back with their state
 * (ApplyGossipReply.handed) for the in-process publisher's fast lane; the separate calls ring and keep them regardless.
 *
 * @example
 * const outcome = await runApplyJob(redis, record, entries.map((entry) => applyGossipCall(keys, topology, rule, budget, sender, entry)));
 * if (outcome.replayed) return reject('replayed');
 */
export async function runApplyJob(
  redis: ScriptedRedis,
  record: JobRecord,
  entries: readonly ScriptCall[],
  quiet = false,
): Promise<ApplyJobReply> {
  if (redis instanceof Cluster) return applyJobInSteps(redis, record, entries);
  const { jobFn } = gossipLibrary();
  const inParts = async (): Promise<ApplyJobReply> => {
    const replies: ApplyGossipReply[] = [];
    // At least one part: a job without entries still checks and records.
    for (let from = 0; from === 0 || from < entries.length; from += JOB_PART_ENTRIES) {
      const part = entries.slice(from, from + JOB_PART_ENTRIES);
      const call = applyJobCall(record, part, { check: from === 0, record: from + JOB_PART_ENTRIES >= entries.length, quiet });
      const reply = parseApplyJobReply(await redis.fcall(jobFn, call.keys.length, ...call.keys, ...call.args), part.length);
      if (reply.replayed) return reply;
      replies.push(...reply.replies);
    }
    return { replayed: false, replies };
  };
  return gossipFunctionsOf(redis)(inParts, () => applyJobInSteps(redis, record, entries));
}

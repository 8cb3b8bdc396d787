// Typed calls of the Lua scripts in lua/ (BullMQ's src/classes/scripts.ts is the model): per script one
// builder that lays out KEYS and ARGV exactly as the script documents them, one parser that turns the reply
// into a typed object (and throws a clear error on a reply of another shape), and one runner that sends the
// call with the command scripts.ts registered. Nothing else in the code base assembles KEYS/ARGV or reads a
// script reply by position. The wire format is the scripts' contract: a builder here changes only with its
// script (the differential and engine tests compare both sides).
import type { Algorithm, Config, Rule } from '../config/schema.ts';
import { fastSetKey, peerPendingKey, shardMarkerKey, shardOfKey, watchSetKey } from '../keys.ts';
import type { GossipEntry } from '../federation/gossip/message.ts';
import { REBALANCE, scriptBudget, type RebalancePolicy, type Topology } from '../protocol/index.ts';
import type { QuotafedCommands, ScriptedRedis, ScriptName } from './scripts.ts';

/** The algorithm codes every script takes (ARGV), one per algorithm of the config schema. */
export const ALGORITHM_CODES: Record<Algorithm, string> = {
  tokenBucket: 'tb',
  fixedWindow: 'fw',
  slidingWindow: 'sw',
  slidingLog: 'sl',
  concurrency: 'cc',
};

/** One script call: its KEYS and its ARGV, in the script's order. */
export interface ScriptCall {
  keys: string[];
  args: (string | number)[];
}

/** A script command as scripts.ts registers it: numkeys, then the keys, then the arguments. */
type ScriptCommand = (numKeys: number, ...args: (string | number)[]) => Promise<unknown>;

/** Sends `call` with the registered command `name` (the client must come from withScripts). */
export function runScript<N extends ScriptName>(redis: Pick<QuotafedCommands, N>, name: N, call: ScriptCall): Promise<unknown> {
  const command = redis[name] as ScriptCommand;
  return command.call(redis, call.keys.length, ...call.keys, ...call.args);
}

/** The numkeys-first form (numkeys, keys, arguments) EVALSHA, FCALL and the decide batcher take. */
export function flatCall(call: ScriptCall): (string | number)[] {
  return [call.keys.length, ...call.keys, ...call.args];
}

// ---- reply checking --------------------------------------------------------------------------------------

function unexpected(script: string, what: string, raw: unknown): Error {
  let shown: string;
  try {
    shown = JSON.stringify(raw)?.slice(0, 200) ?? String(raw);
  } catch {
    shown = String(raw);
  }
  return new Error(`lua/${script}.lua answered an unexpected reply (${what}): ${shown}`);
}

function arrayReply(script: string, raw: unknown, minLength = 0): unknown[] {
  if (!Array.isArray(raw) || raw.length < minLength) throw unexpected(script, `an array of at least ${minLength}`, raw);
  return raw;
}

function numberAt(script: string, raw: unknown, value: unknown): number {
  const number = typeof value === 'number' ? value : typeof value === 'string' && value !== '' ? Number(value) : Number.NaN;
  if (Number.isNaN(number)) throw unexpected(script, 'a number', raw);
  return number;
}

function integerReply(script: string, raw: unknown): number {
  return numberAt(script, raw, raw);
}

// ---- shared argument groups ------------------------------------------------------------------------------

/** REBALANCE as apply_gossip.lua and sweep_watch.lua take it (five values, protocol.ts order). */
export function policyArgs(policy: RebalancePolicy = REBALANCE): number[] {
  return [policy.hungerFraction, policy.reserveFraction, policy.giveFraction, policy.minSurplus, policy.idleMs];
}

/** A rule as apply_gossip.lua and sweep_watch.lua take it: algorithm, limit, period, capacity, budget. */
export function ruleArgs(rule: Rule, fallbackBudget: Config['federation']['leakageBudget'], regions: number): (string | number)[] {
  return [ALGORITHM_CODES[rule.algorithm], rule.limit, rule.period, rule.burst ?? rule.limit, scriptBudget(rule, fallbackBudget, regions)];
}

// ---- decide.lua / decide_lean.lua ------------------------------------------------------------------------

/** A rule's part of a decide call that does not change per request (cost and lease id are per call). */
export interface DecideRuleArgs {
  head: readonly [code: string, limit: number, period: number, capacity: number];
  budget: number;
  leaseTtl: number;
  shadow: 0 | 1;
}

/** A rule as decide.lua takes it, before cost and lease id (built once per rule by the engine). */
export function decideRuleArgs(rule: Rule, fallbackBudget: Config['federation']['leakageBudget'], regions: number): DecideRuleArgs {
  return {
    head: [ALGORITHM_CODES[rule.algorithm], rule.limit, rule.period, rule.burst ?? rule.limit],
    budget: scriptBudget(rule, fallbackBudget, regions),
    leaseTtl: rule.leaseTtl,
    shadow: rule.shadow ? 1 : 0,
  };
}

export interface DecideInputs {
  /** The shard's fixed keys: its marker, then (federated) one pending set per peer. */
  fixedKeys: readonly string[];
  /** The state key of each rule, in rule order. */
  ruleKeys: readonly string[];
  /** Each rule's fixed arguments (decideRuleArgs), in rule order. */
  rules: readonly DecideRuleArgs[];
  topology: Pick<Topology, 'selfIndex' | 'unitsCsv' | 'maxClockSkewMs'>;
  regions: number;
  cost: number;
  leaseId: string;
  /** A pinned clock (tests); '' lets the script read Redis TIME. */
  now: number | '';
}

/**
 * decide.lua's call in the numkeys-first form (numkeys, KEYS, ARGV), which the decide caller and its batcher
 * send as is (FCALL or EVALSHA): built as one array because it is on every request's path.
 */
export function decideCall(input: DecideInputs): (string | number)[] {
  const { fixedKeys, ruleKeys, rules, topology } = input;
  const ruleCount = ruleKeys.length;
  const call: (string | number)[] = [fixedKeys.length + ruleCount, ...fixedKeys];
  for (let i = 0; i < ruleCount; i++) call.push(ruleKeys[i]!);
  call.push(topology.selfIndex, input.regions, topology.unitsCsv, topology.maxClockSkewMs, ruleCount, input.now);
  for (let i = 0; i < ruleCount; i++) {
    const { head, budget, leaseTtl, shadow } = rules[i]!;
    call.push(head[0], head[1], head[2], head[3], input.cost, budget, leaseTtl, input.leaseId, shadow);
  }
  return call;
}

export interface DecideRuleReply {
  allowed: boolean;
  remaining: number;
  resetAtMs: number;
  retryAfterMs: number;
  /** Denied by this region's allowance or tokens while its view shows federation headroom (docs/federation.md §4). */
  falseDenial: boolean;
}

export interface DecideReply {
  /** Every rule of the call allowed (and so committed). */
  allAllowed: boolean;
  /** The script's clock (ms): refund.lua takes it back. */
  now: number;
  rules: DecideRuleReply[];
}

/** decide.lua's (and decide_lean.lua's) reply: all-allowed, now, then five values per rule in call order. */
export function parseDecideReply(raw: unknown, ruleCount: number): DecideReply {
  const reply = arrayReply('decide', raw, 2 + ruleCount * 5);
  const rules: DecideRuleReply[] = [];
  for (let i = 0, at = 2; i < ruleCount; i++, at += 5) {
    rules.push({
      allowed: numberAt('decide', raw, reply[at]) === 1,
      remaining: numberAt('decide', raw, reply[at + 1]),
      resetAtMs: numberAt('decide', raw, reply[at + 2]),
      retryAfterMs: numberAt('decide', raw, reply[at + 3]),
      falseDenial: numberAt('decide', raw, reply[at + 4]) === 1,
    });
  }
  return { allAllowed: numberAt('decide', raw, reply[0]) === 1, now: numberAt('decide', raw, reply[1]), rules };
}

// ---- refund.lua ------------------------------------------------------------------------------------------

export interface RefundRule {
  key: string;
  algorithm: Algorithm;
  period: number;
}

/** Undoes a decide of one identity: KEYS the state keys; ARGV self, decide's now, then code/period/cost/lease per key. */
export function refundCall(selfIndex: number, now: number, rules: readonly RefundRule[], cost: number, leaseId: string): ScriptCall {
  const keys = rules.map((rule) => rule.key);
  const args: (string | number)[] = [selfIndex, now];
  for (const rule of rules) args.push(ALGORITHM_CODES[rule.algorithm], rule.period, cost, leaseId);
  return { keys, args };
}

/** The number of keys refunded. */
export async function runRefund(redis: ScriptedRedis, call: ScriptCall): Promise<number> {
  return integerReply('refund', await runScript(redis, 'refund', call));
}

// ---- release_leases.lua ----------------------------------------------------------------------------------

/** Frees a concurrency lease: KEYS the state key; ARGV lease id, slots. */
export function releaseLeasesCall(lease: { key: string; id: string; slots: number }): ScriptCall {
  return { keys: [lease.key], args: [lease.id, lease.slots] };
}

/** The number of lease slots freed. */
export async function runReleaseLeases(redis: ScriptedRedis, call: ScriptCall): Promise<number> {
  return integerReply('release_leases', await runScript(redis, 'releaseLeases', call));
}

// ---- settle_fallback.lua ---------------------------------------------------------------------------------

export interface SettleItem {
  key: string;
  period: number;
  windowStart: number;
  count: number;
}

/**
 * Writes local-fallback admissions of one shard: KEYS the pending sets then the state keys; ARGV as decide plus per item
 * period/window/count.
 */
export function settleFallbackCall(
  topology: Pick<Topology, 'selfIndex' | 'unitsCsv' | 'maxClockSkewMs'>,
  regions: number,
  pendingKeys: readonly string[],
  items: readonly SettleItem[],
): ScriptCall {
  const args: (string | number)[] = [topology.selfIndex, regions, topology.unitsCsv, topology.maxClockSkewMs, items.length];
  for (const item of items) args.push(item.period, item.windowStart, item.count);
  return { keys: [...pendingKeys, ...items.map((item) => item.key)], args };
}

export async function runSettleFallback(redis: ScriptedRedis, call: ScriptCall): Promise<unknown> {
  return runScript(redis, 'settleFallback', call);
}

// ---- apply_gossip.lua ------------------------------------------------------------------------------------

/** The apply_gossip.lua call for one entry. `now` pins the clock (tests); `policy` defaults to REBALANCE. */
export function applyGossipCall(
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
    shardMarkerKey(shard),
    watchSetKey(shard),
    fastSetKey(shard),
    ...topology.peerIndexes.map((peer) => peerPendingKey(shard, peer)),
  ];
  const args: (string | number)[] = [
    topology.selfIndex,
    n,
    topology.unitsCsv,
    topology.maxClockSkewMs,
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

export interface ApplyGossipReply {
  /** The merge changed the key's state. */
  changed: boolean;
  /** This region's clock minus the sender's change time (ms; negative under skew). */
  lagMs: number;
  /** The merge's rebalance gave allowance to a peer (the key went on the fast lane). */
  granted: boolean;
}

/** apply_gossip.lua's reply: { changed 0|1, now - sender time, granted 0|1 }. */
export function parseApplyGossipReply(raw: unknown): ApplyGossipReply {
  const reply = arrayReply('apply_gossip', raw, 3);
  return {
    changed: numberAt('apply_gossip', raw, reply[0]) === 1,
    lagMs: numberAt('apply_gossip', raw, reply[1]),
    granted: numberAt('apply_gossip', raw, reply[2]) === 1,
  };
}

export async function runApplyGossip(redis: ScriptedRedis, call: ScriptCall): Promise<ApplyGossipReply> {
  return parseApplyGossipReply(await runScript(redis, 'applyGossip', call));
}

// ---- sweep_watch.lua -------------------------------------------------------------------------------------

/** The sweep_watch.lua call for watched keys of one shard. `now` pins the clock (tests). */
export function sweepCall(
  topology: Topology,
  shard: number,
  watched: readonly { key: string; rule: Rule }[],
  fallbackBudget: Config['federation']['leakageBudget'],
  options: { now?: number; policy?: RebalancePolicy; strandedHorizonMs?: number } = {},
): ScriptCall {
  const n = topology.regions.length;
  const keys = [watchSetKey(shard), shardMarkerKey(shard), ...topology.peerIndexes.map((peer) => peerPendingKey(shard, peer))];
  const args: (string | number)[] = [
    topology.selfIndex,
    n,
    topology.unitsCsv,
    topology.maxClockSkewMs,
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
}

/** sweep_watch.lua's reply: { keys rebalanced, keys that left the watch set, { stranded per key } }. */
export function parseSweepReply(raw: unknown): SweepReply {
  const reply = arrayReply('sweep_watch', raw, 3);
  const stranded = arrayReply('sweep_watch', reply[2], 0).map((value) => numberAt('sweep_watch', raw, value));
  return { rebalanced: numberAt('sweep_watch', raw, reply[0]), unwatched: numberAt('sweep_watch', raw, reply[1]), stranded };
}

export async function runSweepWatch(redis: ScriptedRedis, call: ScriptCall): Promise<SweepReply> {
  return parseSweepReply(await runScript(redis, 'sweepWatch', call));
}

// ---- take_pending.lua / ack_pending.lua ------------------------------------------------------------------

/** Reads up to `most` pending keys of one shard for one peer: KEYS the pending set; ARGV most. */
export function takePendingCall(shard: number, peer: number, most: number): ScriptCall {
  return { keys: [peerPendingKey(shard, peer)], args: [most] };
}

export interface PendingKey {
  key: string;
  /** The version the key was marked pending at (ack_pending.lua forgets it only at this version). */
  version: string;
  /** HGETALL of the key (field, value, ...); empty when it expired. */
  fields: string[];
}

/** take_pending.lua's reply: { key, version, HGETALL } per key. */
export function parseTakePendingReply(raw: unknown): PendingKey[] {
  return arrayReply('take_pending', raw).map((item) => {
    if (!Array.isArray(item) || item.length < 3 || !Array.isArray(item[2]))
      throw unexpected('take_pending', '{ key, version, fields } per key', raw);
    return { key: String(item[0]), version: String(item[1]), fields: item[2] as string[] };
  });
}

export async function runTakePending(redis: ScriptedRedis, call: ScriptCall): Promise<PendingKey[]> {
  return parseTakePendingReply(await runScript(redis, 'takePending', call));
}

/** Forgets sent keys still at the version sent: KEYS the pending set; ARGV key, version, key, version, ... */
export function ackPendingCall(shard: number, peer: number, sent: readonly { key: string; version: string }[]): ScriptCall {
  const args: string[] = [];
  for (const { key, version } of sent) args.push(key, version);
  return { keys: [peerPendingKey(shard, peer)], args };
}

/** The number of keys forgotten. */
export async function runAckPending(redis: ScriptedRedis, call: ScriptCall): Promise<number> {
  return integerReply('ack_pending', await runScript(redis, 'ackPending', call));
}

// ---- renew_lock.lua / release_lock.lua -------------------------------------------------------------------

/** Extends a lock this owner holds: KEYS the lock; ARGV owner, ttl ms. */
export function renewLockCall(lockKey: string, owner: string, ttlMs: number): ScriptCall {
  return { keys: [lockKey], args: [owner, ttlMs] };
}

/** Whether the lock was still this owner's (and is extended). */
export async function runRenewLock(redis: ScriptedRedis, call: ScriptCall): Promise<boolean> {
  return integerReply('renew_lock', await runScript(redis, 'renewLock', call)) === 1;
}

/** Deletes a lock this owner holds: KEYS the lock; ARGV owner. */
export function releaseLockCall(lockKey: string, owner: string): ScriptCall {
  return { keys: [lockKey], args: [owner] };
}

export async function runReleaseLock(redis: ScriptedRedis, call: ScriptCall): Promise<boolean> {
  return integerReply('release_lock', await runScript(redis, 'releaseLock', call)) === 1;
}

// ---- screen_gossip.lua -----------------------------------------------------------------------------------

export interface ScreenInputs {
  /** The queue's wait list and failed set. */
  waitKey: string;
  failedKey: string;
  /** The queue's job key prefix. */
  jobPrefix: string;
  maxBytes: number;
  /** Jobs at the tail of the wait list to look at. */
  depth: number;
  now: number;
}

/** Fails queued gossip jobs whose data is oversized: KEYS wait, failed; ARGV prefix, most bytes, depth, now. */
export function screenGossipCall(input: ScreenInputs): ScriptCall {
  return { keys: [input.waitKey, input.failedKey], args: [input.jobPrefix, input.maxBytes, input.depth, input.now] };
}

/** screen_gossip.lua's reply: id, size, id, size, ... of the jobs it failed. */
export function parseScreenGossipReply(raw: unknown): { id: string; bytes: number }[] {
  const reply = arrayReply('screen_gossip', raw);
  if (reply.length % 2 !== 0) throw unexpected('screen_gossip', 'id, size pairs', raw);
  const refused: { id: string; bytes: number }[] = [];
  for (let i = 0; i < reply.length; i += 2) refused.push({ id: String(reply[i]), bytes: numberAt('screen_gossip', raw, reply[i + 1]) });
  return refused;
}

export async function runScreenGossip(
  redis: Pick<QuotafedCommands, 'screenGossip'>,
  call: ScriptCall,
): Promise<{ id: string; bytes: number }[]> {
  return parseScreenGossipReply(await runScript(redis, 'screenGossip', call));
}

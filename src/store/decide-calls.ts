// The typed calls of decide.lua and decide_single.lua (one call, one layout, one reply for both) and of their
// libraries' batch function. The argument layout is written here once for TypeScript, and once for Lua in
// lua/includes/read_rule.lua; test/store/decide-layout.test.ts pins the two together through a real Redis.
import type { Config, Rule } from '../config/schema.ts';
import type { KeyLayout } from '../keys.ts';
import { scriptBudget, type Topology } from '../protocol/index.ts';
import { arrayReply, numberAt, unexpected } from './replies.ts';
import { ALGORITHM_CODES } from './script-call.ts';

/** The decide call's ARGV positions (1-based, as Lua reads them), before the rules. */
export const DECIDE_ARGV = { self: 1, regions: 2, units: 3, skew: 4, ruleCount: 5, now: 6 } as const;

/** Rule i's values (i from 1) follow ARGV[DECIDE_RULES_AFTER + (i - 1) * DECIDE_RULE_WIDTH]. */
export const DECIDE_RULES_AFTER = 6;
/** How many values each rule takes. */
export const DECIDE_RULE_WIDTH = 10;
/** A rule's values, by their offset after the rule's start. */
export const DECIDE_RULE_ARGV = {
  code: 1,
  limit: 2,
  period: 3,
  burst: 4,
  cost: 5,
  budget: 6,
  leaseTtl: 7,
  leaseId: 8,
  shadow: 9,
  /** Units to take for a local lease beyond the cost once admitted (lua/includes/local_lease.lua); 0 = none. */
  leaseAsk: 10,
} as const;

/** After the last rule: its values, by their offset after the last rule's last value. */
export const DECIDE_TAIL_ARGV = { horizon: 1, peek: 2 } as const;

/** A rule's part of a decide call that does not change per request (cost and lease id are per call). */
export interface DecideRuleArgs {
  head: readonly [code: string, limit: number, period: number, capacity: number];
  budget: number;
  leaseTtl: number;
  shadow: 0 | 1;
  /** A cost the rule charges whatever the request's (rules[].costFromResponse: its reserve). */
  cost?: number | undefined;
}

/** A rule as decide.lua takes it, before cost and lease id (built once per rule by the engine). */
export function decideRuleArgs(rule: Rule, fallbackBudget: Config['federation']['leakageBudget'], regions: number): DecideRuleArgs {
  return {
    head: [ALGORITHM_CODES[rule.algorithm], rule.limit, rule.period, rule.burst ?? rule.limit],
    budget: scriptBudget(rule, fallbackBudget, regions),
    leaseTtl: rule.leaseTtl,
    shadow: rule.shadow ? 1 : 0,
    cost: rule.costFromResponse?.reserve,
  };
}

/**
 * A shard's fixed keys of a decide call, as lua/decide.lua's header lays them out: its marker, then, federated
 * (`peerIndexes` given), one pending set per peer, the fast-lane set and the bell.
 */
export function decideShardKeys(layout: KeyLayout, shard: number, peerIndexes?: readonly number[]): string[] {
  const keys = [layout.shardMarkerKey(shard)];
  if (peerIndexes === undefined) return keys;
  for (const peer of peerIndexes) keys.push(layout.peerPendingKey(shard, peer));
  keys.push(layout.fastSetKey(shard), layout.bellKey(shard));
  return keys;
}

/** Everything of one decide call. */
export interface DecideInputs {
  /** The shard's fixed keys (decideShardKeys). */
  fixedKeys: readonly string[];
  /** The state key of each rule, in rule order. */
  ruleKeys: readonly string[];
  /** Each rule's fixed arguments (decideRuleArgs), in rule order. */
  rules: readonly DecideRuleArgs[];
  topology: Pick<Topology, 'selfIndex' | 'unitsCsv' | 'maxClockSkewMs' | 'horizonMs'>;
  regions: number;
  cost: number;
  leaseId: string;
  /** Per rule, in rule order: units to take for a local lease beyond the cost (none when omitted). */
  leaseAsks?: readonly number[] | undefined;
  /** A pinned clock (tests); '' lets the script read Redis TIME. */
  now: number | '';
  /** Answer what the decision would be and write nothing (RequestContext.peek). */
  peek?: boolean | undefined;
}

/**
 * decide.lua's call in the numkeys-first form (numkeys, KEYS, ARGV), which the decide caller and its batcher
 * send as is (FCALL or EVALSHA): built as one array because it is on every request's path. The values are
 * written in ascending position, so the array stays packed.
 */
export function decideCall(input: DecideInputs): (string | number)[] {
  const { fixedKeys, ruleKeys, rules, topology } = input;
  const ruleCount = ruleKeys.length;
  const call: (string | number)[] = [fixedKeys.length + ruleCount, ...fixedKeys];
  for (let i = 0; i < ruleCount; i++) call.push(ruleKeys[i]!);
  // call[argv + j] is ARGV[j].
  const argv = call.length - 1;
  call[argv + DECIDE_ARGV.self] = topology.selfIndex;
  call[argv + DECIDE_ARGV.regions] = input.regions;
  call[argv + DECIDE_ARGV.units] = topology.unitsCsv;
  call[argv + DECIDE_ARGV.skew] = topology.maxClockSkewMs;
  call[argv + DECIDE_ARGV.ruleCount] = ruleCount;
  call[argv + DECIDE_ARGV.now] = input.now;
  for (let i = 0; i < ruleCount; i++) {
    const { head, budget, leaseTtl, shadow, cost } = rules[i]!;
    const at = argv + DECIDE_RULES_AFTER + i * DECIDE_RULE_WIDTH;
    call[at + DECIDE_RULE_ARGV.code] = head[0];
    call[at + DECIDE_RULE_ARGV.limit] = head[1];
    call[at + DECIDE_RULE_ARGV.period] = head[2];
    call[at + DECIDE_RULE_ARGV.burst] = head[3];
    call[at + DECIDE_RULE_ARGV.cost] = cost ?? input.cost;
    call[at + DECIDE_RULE_ARGV.budget] = budget;
    call[at + DECIDE_RULE_ARGV.leaseTtl] = leaseTtl;
    call[at + DECIDE_RULE_ARGV.leaseId] = input.leaseId;
    call[at + DECIDE_RULE_ARGV.shadow] = shadow;
    call[at + DECIDE_RULE_ARGV.leaseAsk] = input.leaseAsks?.[i] ?? 0;
  }
  const tail = argv + DECIDE_RULES_AFTER + ruleCount * DECIDE_RULE_WIDTH;
  call[tail + DECIDE_TAIL_ARGV.horizon] = topology.horizonMs;
  call[tail + DECIDE_TAIL_ARGV.peek] = input.peek === true ? 1 : 0;
  return call;
}

/** One rule's part of a decide reply. */
export interface DecideRuleReply {
  allowed: boolean;
  remaining: number;
  resetAtMs: number;
  retryAfterMs: number;
  /** Denied by this region's allowance or tokens while its view shows federation headroom (docs/federation.md §4). */
  falseDenial: boolean;
  /**
   * The federation's remaining quota as this region's view has it, never below `remaining`
   * (protocol windowQuotaRemaining / bucketQuotaRemaining); `remaining` itself for one region.
   */
  quotaRemaining: number;
  /** Units taken for a local lease beyond the request's cost (lua/includes/local_lease.lua); 0 when none were asked. */
  leased: number;
}

/** A decide reply, parsed. */
export interface DecideReply {
  /** Every rule of the call allowed (and so committed). */
  allAllowed: boolean;
  /** The script's clock (ms): refund.lua takes it back. */
  now: number;
  rules: DecideRuleReply[];
}

/** How many values each rule takes in a decide reply. */
export const DECIDE_REPLY_WIDTH = 7;

/** decide.lua's (and decide_single.lua's) reply: all-allowed, now, then seven values per rule in call order. */
export function parseDecideReply(raw: unknown, ruleCount: number): DecideReply {
  const reply = arrayReply('decide', raw, 2 + ruleCount * DECIDE_REPLY_WIDTH);
  const rules: DecideRuleReply[] = [];
  for (let i = 0, at = 2; i < ruleCount; i++, at += DECIDE_REPLY_WIDTH) {
    rules.push({
      allowed: numberAt('decide', raw, reply[at]) === 1,
      remaining: numberAt('decide', raw, reply[at + 1]),
      resetAtMs: numberAt('decide', raw, reply[at + 2]),
      retryAfterMs: numberAt('decide', raw, reply[at + 3]),
      falseDenial: numberAt('decide', raw, reply[at + 4]) === 1,
      quotaRemaining: numberAt('decide', raw, reply[at + 5]),
      leased: numberAt('decide', raw, reply[at + 6]),
    });
  }
  return { allAllowed: numberAt('decide', raw, reply[0]) === 1, now: numberAt('decide', raw, reply[1]), rules };
}

/** Whether two decide calls take the same arguments (ARGV), whatever their keys. */
function sameArguments(a: readonly (string | number)[], b: readonly (string | number)[]): boolean {
  const aKeys = a[0] as number;
  const bKeys = b[0] as number;
  if (a.length - aKeys !== b.length - bKeys) return false;
  for (let i = 1 + aKeys, j = 1 + bKeys; i < a.length; i++, j++) if (a[i] !== b[j]) return false;
  return true;
}

/**
 * The batch function's FCALL arguments (after the function name) for several decide calls (each in decideCall's
 * form): numkeys, every call's keys, then the batch ARGV as lua/includes/decide_batch.lua documents it.
 */
export function decideBatchArgs(calls: readonly (readonly (string | number)[])[]): (string | number)[] {
  let numKeys = 0;
  for (const call of calls) numKeys += call[0] as number;
  const out: (string | number)[] = [numKeys];
  for (const call of calls) {
    const keys = call[0] as number;
    for (let i = 1; i <= keys; i++) out.push(call[i]!);
  }
  out.push(calls.length);
  let previous: readonly (string | number)[] | undefined;
  for (const call of calls) {
    const keys = call[0] as number;
    if (previous !== undefined && sameArguments(previous, call)) {
      out.push(keys, -1);
    } else {
      out.push(keys, call.length - 1 - keys);
      for (let i = 1 + keys; i < call.length; i++) out.push(call[i]!);
    }
    previous = call;
  }
  return out;
}

const COMMA = 44;
const SEMICOLON = 59;
const MINUS = 45;
const BANG = 33;
const ZERO = 48;

/**
 * The batch function's packed reply (lua/includes/batch.lua batch_packer) as one reply per call, in call order:
 * the integers of the call's decide reply (what parseDecideReply reads) or the Error the call raised. Throws when
 * the reply is not of that shape or does not hold `count` calls.
 *
 * @example
 * unpackBatchReply(['1,1765072800123,1,9,1765072860000,0,0,9,0;!', new Error('ERR bad rule')], 2);
 * // [[1, 1765072800123, 1, 9, 1765072860000, 0, 0, 9, 0], Error('ERR bad rule')]
 */
export function unpackBatchReply(raw: unknown, count: number): (number[] | Error)[] {
  const parts: readonly unknown[] = Array.isArray(raw) ? raw : [];
  const text = parts[0];
  if (typeof text !== 'string') throw unexpected('decide_batch', 'a packed text and its errors', raw);
  const replies: (number[] | Error)[] = [];
  let errors = 1;
  let row: number[] = [];
  let value = 0;
  let negative = false;
  let digits = 0;
  const end = text.length;
  for (let i = 0; i <= end; i++) {
    const code = i < end ? text.charCodeAt(i) : SEMICOLON;
    if (code === COMMA || code === SEMICOLON) {
      if (digits === 0) throw unexpected('decide_batch', 'rows of integers', raw);
      row.push(negative ? -value : value);
      value = 0;
      negative = false;
      digits = 0;
      if (code === SEMICOLON) {
        replies.push(row);
        row = [];
      }
    } else if (code >= ZERO && code <= ZERO + 9) {
      value = value * 10 + (code - ZERO);
      digits++;
    } else if (code === MINUS && digits === 0 && !negative) {
      negative = true;
    } else if (code === BANG && digits === 0 && !negative && row.length === 0 && (i + 1 === end || text.charCodeAt(i + 1) === SEMICOLON)) {
      const error = parts[errors++];
      replies.push(error instanceof Error ? error : new Error(`decide batch call failed: ${String(error)}`));
      i++;
    } else {
      throw unexpected('decide_batch', 'rows of integers', raw);
    }
  }
  if (replies.length !== count) throw unexpected('decide_batch', `${count} calls' rows`, raw);
  return replies;
}

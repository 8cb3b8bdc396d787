// The typed calls that settle decisions after the fact: refund.lua (undo a decide that another identity of the
// request denied), release_leases.lua (free a concurrency lease), settle_fallback.lua (write the local
// fallback's admissions into Redis once it answers again).
import type { Algorithm } from '../config/schema.ts';
import { layoutOfKey, shardOfKey } from '../keys.ts';
import type { Topology } from '../protocol/index.ts';
import type { ScriptedRedis } from './commands.ts';
import { integerReply } from './replies.ts';
import { ALGORITHM_CODES, runScript, type ScriptCall } from './script-call.ts';

// ---- refund.lua ------------------------------------------------------------------------------------------

/** One state key to refund, with what refund.lua needs of its rule. */
export interface RefundRule {
  key: string;
  algorithm: Algorithm;
  period: number;
  /** The rule's limit: a single region's token bucket gives back the cost's refill time (lua/includes/gcra.lua). */
  limit: number;
}

/** How long refund.lua's marker of a refund lives: well beyond any resend of the same command. */
export const REFUND_MARK_MS = 120_000;

/**
 * A rule's state key as refund.lua takes it.
 *
 * @example
 * ```ts
 * refundCall(self, now, [refundRuleOf(key, rule)], cost, leaseId, marker);
 * ```
 */
export function refundRuleOf(key: string, rule: Omit<RefundRule, 'key'>): RefundRule {
  return { key, algorithm: rule.algorithm, period: rule.period, limit: rule.limit };
}

/**
 * refund.lua's call (undoes a decide of one identity): KEYS the rules' state keys (one shard), then the refund's marker (refundMarkerKey of the same
 * shard and a refund id unique to this refund), so that the same refund delivered twice refunds once. ARGV: self, decide's now, the
 * marker's life, then algorithm code, period, cost, lease id and limit per key.
 */
export function refundCall(
  selfIndex: number,
  now: number,
  rules: readonly RefundRule[],
  cost: number,
  leaseId: string,
  marker: string,
): ScriptCall {
  const keys = [...rules.map((rule) => rule.key), marker];
  const args: (string | number)[] = [selfIndex, now, REFUND_MARK_MS];
  for (const rule of rules) args.push(ALGORITHM_CODES[rule.algorithm], rule.period, cost, leaseId, rule.limit);
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

/** One window's local-fallback admissions of one state key. */
export interface SettleItem {
  key: string;
  period: number;
  windowStart: number;
  count: number;
}

/**
 * Writes local-fallback admissions of one shard: KEYS the pending sets, the shard's bell (federated only), then the
 * state keys; ARGV as decide plus per item period/window/count.
 */
export function settleFallbackCall(
  topology: Pick<Topology, 'selfIndex' | 'unitsCsv' | 'maxClockSkewMs'>,
  regions: number,
  pendingKeys: readonly string[],
  items: readonly SettleItem[],
): ScriptCall {
  const args: (string | number)[] = [topology.selfIndex, regions, topology.unitsCsv, topology.maxClockSkewMs, items.length];
  for (const item of items) args.push(item.period, item.windowStart, item.count);
  // The bell of the items' shard (one shard per call), rung when the call queued a key for the peers.
  const bell = pendingKeys.length > 0 && items.length > 0 ? [layoutOfKey(items[0]!.key).bellKey(shardOfKey(items[0]!.key))] : [];
  return { keys: [...pendingKeys, ...bell, ...items.map((item) => item.key)], args };
}

/** Sends a settle_fallback.lua call; its reply as the script answers it. */
export async function runSettleFallback(redis: ScriptedRedis, call: ScriptCall): Promise<unknown> {
  return runScript(redis, 'settleFallback', call);
}

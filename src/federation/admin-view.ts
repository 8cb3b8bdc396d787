// The federation views for operators: what this region holds for one rule and one caller, decoded, and the
// peers as this region sees them. Served by the admin routes (src/http/federation-admin.ts) and the dashboard.
import type { RequestContext } from '../engine/types.ts';
import type { Cluster, Redis } from 'ioredis';
import type { Config, Rule } from '../config/schema.ts';
import { advertisedLimit, matchRules } from '../engine/rules.ts';
import { isWrongTypeError } from '../store/client.ts';
import { silentStringFields } from '../store/silent-string.ts';
import { layoutOf, shardOfKey } from '../keys.ts';
import { decodeState, type SlotCells } from './gossip/cells.ts';
import type { PeerStatus } from './peers.ts';
import {
  ruleFederationParams,
  singleBucketTokens,
  topologyOf,
  windowAllowance,
  windowForfeited,
  type WindowSlot,
} from '../protocol/index.ts';

/** Who is asking, as in a /v1/check body. */
export interface Caller {
  apiKey?: string | undefined;
  ip?: string | undefined;
  /** Request path; matched against the rule's endpoint patterns. */
  endpoint?: string | undefined;
  method?: string | undefined;
}

export interface WindowView {
  /** Window (or token-bucket epoch) id = floor(ms / period). */
  id: number;
  startMs: number;
  endMs: number;
  current: boolean;
  /** This region's recovery fence forfeits this window (it admits nothing in it). */
  fenced: boolean;
  /** c of this region (authoritative). */
  own: number;
  /** c of every region as this region sees it. */
  consumption: Record<string, number>;
  /** Non-zero transfers x (allowance for windows, share units for token buckets). */
  transfers: { from: string; to: string; amount: number }[];
  /** Escrow allowance l_r of every region (windows; null = unbounded), or share units (token bucket). */
  allowance: Record<string, number | null>;
  globalView: number;
  /** What the peers acknowledged of this region's consumption: the minimum, and each peer's a[p][self]. */
  acknowledged: number;
  acknowledgedBy: Record<string, number>;
}

export interface KeyView {
  rule: string;
  algorithm: Rule['algorithm'];
  key: string;
  shard: number;
  region: string;
  exists: boolean;
  version: number;
  changedAtMs: number | null;
  /** This region's shard fence (ms; 0 = no data loss). */
  fence: number;
  /** Per peer: the key waits for delivery at this version, or null when delivered. */
  pending: Record<string, number | null>;
  windows: WindowView[];
  /** Token bucket only: tokens, last refill (ms), share units in force at the last refill. */
  bucket?: { tokens: number | null; lastRefillMs: number | null; shareUnits: number | null } | undefined;
}

export class AdminViewError extends Error {
  constructor(
    readonly status: 400 | 404,
    message: string,
  ) {
    super(message);
  }
}

function toWindowSlot(slot: SlotCells, n: number): WindowSlot {
  const rows = (flat: number[]) => Array.from({ length: n }, (_, o) => flat.slice(o * n, o * n + n));
  return { id: slot.id, c: slot.c, x: rows(slot.x), a: rows(slot.a), t: slot.t };
}

/**
 * What the federation holds of one caller's key under one rule. `withPlan` fills in the caller's plan as a decision
 * would (the engine's `withPlan`: admin assignments included); without it, the config's plans apply.
 */
export async function federationKeyView(
  config: Config,
  redis: Redis | Cluster,
  ruleName: string,
  caller: Caller,
  withPlan: (request: RequestContext) => RequestContext = (request) => request,
): Promise<KeyView> {
  const rule = config.rules.find((candidate) => candidate.name === ruleName);
  if (!rule) throw new AdminViewError(404, `no rule named "${ruleName}"`);
  const matched = matchRules(
    config,
    withPlan({
      apiKey: caller.apiKey,
      ip: caller.ip ?? '',
      method: caller.method ?? 'GET',
      path: caller.endpoint ?? '/',
    }),
  ).find((entry) => entry.rule.name === ruleName);
  if (!matched) throw new AdminViewError(404, `rule "${ruleName}" does not apply to this caller (check apiKey, ip, endpoint, method)`);

  const topology = topologyOf(config);
  const n = topology.regions.length;
  const self = topology.selfIndex;
  const key = matched.key;
  const shard = shardOfKey(key);
  const keys = layoutOf(config);
  const peers = topology.peerIndexes;
  const [raw, fenceRaw, ...scores] = await Promise.all([
    readStateHash(redis, key, rule),
    redis.hget(keys.shardMarkerKey(shard), 'fence'),
    ...peers.map((peer) => redis.zscore(keys.peerPendingKey(shard, peer), key)),
  ]);
  const state = decodeState(raw as Record<string, string>, n);
  const fence = Number(fenceRaw ?? 0);
  const params = ruleFederationParams(config, rule, topology);
  const current = Math.floor(Date.now() / rule.period);
  const isBucket = rule.algorithm === 'tokenBucket';

  const windows = state.slots
    .sort((a, b) => b.id - a.id)
    .map((slot): WindowView => {
      const cells = toWindowSlot(slot, n);
      const transfers: WindowView['transfers'] = [];
      for (let o = 0; o < n; o++) {
        for (let d = 0; d < n; d++) {
          const amount = cells.x[o]![d]!;
          if (o !== d && amount > 0) transfers.push({ from: topology.regions[o]!, to: topology.regions[d]!, amount });
        }
      }
      const allowance: Record<string, number | null> = {};
      topology.regions.forEach((region, d) => {
        if (isBucket) {
          let net = topology.units[d]!;
          for (let o = 0; o < n; o++) if (o !== d) net += cells.x[o]![d]! - cells.x[d]![o]!;
          allowance[region] = net;
        } else {
          const value = windowAllowance(params, cells, d);
          allowance[region] = Number.isFinite(value) ? value : null;
        }
      });
      const acknowledgedBy: Record<string, number> = {};
      for (const peer of peers) acknowledgedBy[topology.regions[peer]!] = cells.a[peer]![self]!;
      return {
        id: slot.id,
        startMs: slot.id * rule.period,
        endMs: (slot.id + 1) * rule.period,
        current: slot.id === current,
        fenced: windowForfeited(params, fence, slot.id),
        own: slot.c[self]!,
        consumption: Object.fromEntries(topology.regions.map((region, o) => [region, slot.c[o]!])),
        transfers,
        allowance,
        globalView: slot.c.reduce((sum, value) => sum + value, 0),
        acknowledged: peers.length === 0 ? slot.c[self]! : Math.min(...Object.values(acknowledgedBy)),
        acknowledgedBy,
      };
    });

  const numberOrNull = (value: string | undefined) => (value === undefined ? null : Number(value));
  return {
    rule: rule.name,
    algorithm: rule.algorithm,
    key,
    shard,
    region: config.region,
    exists: Object.keys(raw).length > 0,
    version: state.version,
    changedAtMs: state.changedAt || null,
    fence,
    pending: Object.fromEntries(
      peers.map((peer, i) => [topology.regions[peer]!, scores[i] === null || scores[i] === undefined ? null : Number(scores[i])]),
    ),
    windows,
    bucket: isBucket
      ? {
          tokens: numberOrNull(state.regional.tokens),
          lastRefillMs: numberOrNull(state.regional.last_refill),
          shareUnits: numberOrNull(state.regional.sig),
        }
      : undefined,
  };
}

/** The federation as this region sees it: its region, the topology and every peer's status. */
export interface PeersView {
  region: string;
  regions: readonly string[];
  fingerprint: string;
  peers: PeerStatus[];
}

export function federationPeersView(config: Config, peers: PeerStatus[]): PeersView {
  const topology = topologyOf(config);
  return { region: config.region, regions: topology.regions, fingerprint: topology.fingerprint, peers };
}

/**
 * A state key as its hash. A single region's token bucket is one number (lua/includes/gcra.lua, the time it is full
 * again): shown as the hash it stands for now, its tokens at this moment; a silent federated key is one string
 * (lua/includes/silent_string.lua): shown as its hash.
 */
async function readStateHash(redis: Redis | Cluster, key: string, rule: Rule): Promise<Record<string, string>> {
  try {
    return await redis.hgetall(key);
  } catch (error) {
    if (!isWrongTypeError(error)) throw error;
    const held = await redis.getBuffer(key);
    const now = Date.now();
    if (held === null) return {};
    const silent = silentStringFields(held);
    if (silent) return silent;
    if (rule.algorithm !== 'tokenBucket') throw error;
    const bucket = { limit: rule.limit, periodMs: rule.period, burst: advertisedLimit(rule) };
    return { tokens: String(singleBucketTokens(bucket, Number(held.toString('utf8')), now)), last_refill: String(now) };
  }
}

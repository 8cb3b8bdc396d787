// The one key layout. Every Redis key quotafed touches is built here.
//
// Rule state:    qf:{s<shard>}:<rule>:<identity-hash>
// Shard marker:  qf:{s<shard>}:m             (recovery fence; its absence means the data was lost)
// Peer backlog:  qf:{s<shard>}:p:<peer>      (ZSET of keys not yet delivered to that peer, by change version)
// Watch set:     qf:{s<shard>}:w             (SET of keys whose view showed a hungry peer; swept each sync round)
// Fast lane:     qf:{s<shard>}:f             (SET of keys to send to every peer now)
// Bell:          qf:{s<shard>}:b             (LIST, at most one element: rung by a script that added to the
//                                             shard's fast-lane, pending or watch set; the publisher blocks on it)
// Region meta:   qf:meta                     (region, fingerprint, started, fence, heard:<region>)
// Publisher:     qf:meta:publisher           (lock: one gossip publisher per region)
// Recovery:      qf:meta:recovery            (lock: one process of the region runs the start-up check)
// Replay record: qf:seen:<region>            (ZSET of gossip sequence numbers applied from that region)
// Admin lists:   qf:lists                    (HASH: the allow/deny entries added through the admin API, and `v`)
// Admin plans:   qf:plans                    (HASH: the plan assignments of the admin API, one field per write, and `v`)
// Plan outbox:   qf:plans:pending            (HASH: assignments written here that a peer has not stored yet)
// Gossip queue:  BullMQ prefix {qf} (hash-tagged so a queue lives in one cluster slot)
// Everything of one shard shares one cluster slot, so a decision and its bookkeeping are one atomic script.
//
// Client-supplied material (API keys, IPs, paths) never appears in a key: it is hashed, so braces, colons,
// unicode and 8 KB keys can neither collide with each other nor move a key to another cluster slot.
import { hash } from 'node:crypto';

export const KEY_PREFIX = 'qf';
/** Number of dirty-set shards. Fixed: changing it changes the key layout of a running federation. */
export const KEY_SHARDS = 64;
export const GOSSIP_QUEUE_PREFIX = '{qf}';
export const META_KEY = `${KEY_PREFIX}:meta`;

export interface IdentityParts {
  /** The principal decides the cluster slot: all keys of one API key (or one IP) share it. */
  principal: string;
  /** Every dimension value the rule is keyed by, in the rule's order. */
  dimensions: readonly string[];
}

// One-shot SHA-256 straight to text: the same bytes as createHash().update(text, 'utf8').digest(), and about a
// third of the CPU of asking for a Buffer and converting it (node:crypto's Buffer output path allocates).

export function shardOf(principal: string): number {
  // The first 32 bits, big-endian (what readUInt32BE(0) of the digest reads).
  return Number.parseInt(hash('sha256', principal, 'hex').slice(0, 8), 16) % KEY_SHARDS;
}

export function shardTag(shard: number): string {
  return `{s${shard}}`;
}

/** 96 bits of SHA-256 over the length-prefixed dimensions: injective in practice, fixed length. */
export function identityHash(ruleName: string, dimensions: readonly string[]): string {
  let framed = `${Buffer.byteLength(ruleName, 'utf8')}:${ruleName}`;
  for (const part of dimensions) framed += `|${Buffer.byteLength(part, 'utf8')}:${part}`;
  // 16 base64url characters are exactly the digest's first 12 bytes.
  return hash('sha256', framed, 'base64url').slice(0, 16);
}

export function ruleKey(ruleName: string, identity: IdentityParts): string {
  return stateKeyOf(ruleName, identity).key;
}

/** The state key and its shard, hashing the principal once (the decision path needs both). */
export function stateKeyOf(ruleName: string, identity: IdentityParts): { key: string; shard: number } {
  const shard = shardOf(identity.principal);
  return { key: `${KEY_PREFIX}:${shardTag(shard)}:${ruleName}:${identityHash(ruleName, identity.dimensions)}`, shard };
}

export function shardMarkerKey(shard: number): string {
  return `${KEY_PREFIX}:${shardTag(shard)}:m`;
}

/** Pending-delivery ZSET of one shard for the peer with this region index. */
export function peerPendingKey(shard: number, peerIndex: number): string {
  return `${KEY_PREFIX}:${shardTag(shard)}:p:${peerIndex}`;
}

/** Keys of one shard whose last merge left a hungry peer in view: the sync loop rebalances them again. */
export function watchSetKey(shard: number): string {
  return `${KEY_PREFIX}:${shardTag(shard)}:w`;
}

/**
 * Fast-lane set qf:{s<n>}:f: state keys to send to every peer now rather than at the next sync round (a
 * region's first admission of a key in a window/epoch, a grant made while applying gossip).
 */
export function fastSetKey(shard: number): string {
  return `${KEY_PREFIX}:${shardTag(shard)}:f`;
}

/**
 * The shard's bell qf:{s<n>}:b: a list holding at most one element, pushed (lua/includes/bell.lua) by every script
 * that added a key to the shard's fast-lane set, a peer's pending set or the watch set, when it was empty. The
 * publisher blocks on the 64 bells (BLMPOP) instead of polling the sets.
 */
export function bellKey(shard: number): string {
  return `${KEY_PREFIX}:${shardTag(shard)}:b`;
}

/**
 * Refund marker qf:{s<n>}:rf:<refund id>: written by refund.lua with its first run, so a refund the client sends
 * again (ioredis resends unanswered commands after a reconnect) returns nothing twice. Expires after REFUND_MARK_MS.
 */
export function refundMarkerKey(shard: number, refundId: string): string {
  return `${KEY_PREFIX}:${shardTag(shard)}:rf:${refundId}`;
}

/** The shard a state key lives in. */
export function shardOfKey(stateKey: string): number {
  const match = /^qf:\{s(\d+)\}:/.exec(stateKey);
  if (!match) throw new Error(`not a quotafed state key: ${stateKey}`);
  return Number(match[1]);
}

/** The rule name embedded in a state key (used when applying gossip). */
export function ruleNameOf(stateKey: string): string {
  const parts = stateKey.split(':');
  if (parts.length !== 4) throw new Error(`not a quotafed state key: ${stateKey}`);
  return parts[2]!;
}

export const STATE_KEY_PATTERN = /^qf:\{s\d{1,3}\}:[A-Za-z0-9_.-]{1,64}:[A-Za-z0-9_-]{16}$/;

/**
 * The region's admin-added allow and deny entries (src/engine/admin-lists.ts): a HASH whose fields are
 * `<list>:<kind>:<value>` (`deny:ip:10.0.0.0/8`, `allow:apiKey:internal-batch`) and whose field `v` counts the
 * changes, so each process re-reads the whole hash only when `v` moved. One key: one slot on a Redis Cluster.
 */
export const LISTS_KEY = `${KEY_PREFIX}:lists`;

/**
 * The plan assignments of the admin API (src/engine/admin-plans.ts), in every region: a HASH with one field per
 * write, `a:<at ms>:<region>:<apiKey>` → `{"plan":…,"previous":…}` (the newest per API key wins), and the change
 * counter `v`, as LISTS_KEY. One key: one slot on a Redis Cluster.
 */
export const PLANS_KEY = `${KEY_PREFIX}:plans`;

/**
 * Assignments written in this region that a peer has not stored yet (src/federation/plan-gossip.ts): a HASH whose
 * fields are `<peer>|<field of PLANS_KEY>` and whose values are the write's; retried until the peer stores it.
 */
export const PLANS_PENDING_KEY = `${KEY_PREFIX}:plans:pending`;

/** One gossip publisher per region at a time. */
export const PUBLISHER_LOCK_KEY = `${META_KEY}:publisher`;
export const RECOVERY_LOCK_KEY = `${META_KEY}:recovery`;

/** Sequence numbers of gossip jobs applied from one region (replay protection). */
export function replayKey(from: string): string {
  return `${KEY_PREFIX}:seen:${from}`;
}

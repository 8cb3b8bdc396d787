// The one key layout. Every Redis key quotafed touches is built here, under the deployment's prefix
// (`redis.keyPrefix`, default `qf`; shown as qf below): several quotafed deployments can share one Redis, each under
// its own prefix. A KeyLayout is built from the config (layoutOf) and used wherever a key is made; sibling keys of a
// state key follow that key's own prefix (layoutOfKey). ioredis's own keyPrefix is never used: scripts keep full key
// names in ZSETs and SETs (pending, watch, fast lane) and read them back.
//
// Rule state:    qf:{s<shard>}:<rule>:<identity-hash>
// Shard marker:  qf:{s0}:m                   (recovery fence; its absence means the data was lost; one per
//                                             redis-server, qf:{s<shard>}:m per shard on a Redis Cluster)
// Peer backlog:  qf:{s<shard>}:p:<peer>      (ZSET of keys not yet delivered to that peer, by change version)
// Watch set:     qf:{s<shard>}:w             (SET of keys whose view showed a hungry peer; swept each sync round)
// Fast lane:     qf:{s<shard>}:f             (SET of keys to send to every peer now)
// Bell:          qf:{s<shard>}:b             (LIST, at most one element: rung by a script that added to the
//                                             shard's fast-lane, pending or watch set; the publisher blocks on it)
// Region meta:   qf:meta                     (region, fingerprint, started, fence, heard:<region>)
// Publisher:     qf:meta:publisher           (lock: one gossip publisher per region)
// Recovery:      qf:meta:recovery            (lock: one process of the region runs the start-up check)
// Standalone:    qf:meta:rules               (a region without federation: the rules it last started with)
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

/** The prefix of every key when `redis.keyPrefix` is not set. */
export const DEFAULT_KEY_PREFIX = 'qf';
/** What `redis.keyPrefix` accepts (so a prefix never holds ":", braces or glob characters). */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;
/** Number of dirty-set shards. Fixed: changing it changes the key layout of a running federation. */
export const KEY_SHARDS = 64;

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

/** The rule name embedded in a state key (used when applying gossip). */
export function ruleNameOf(stateKey: string): string {
  const parts = stateKey.split(':');
  if (parts.length !== 4) throw new Error(`not a quotafed state key: ${stateKey}`);
  return parts[2]!;
}

/**
 * Every key of one deployment, under its prefix. Built once per prefix (layoutOf, keyLayout); pass it where keys
 * are made.
 *
 * @example
 * ```ts
 * const keys = layoutOf(config);
 * const { key, shard } = keys.stateKeyOf('search', { principal: 'api-key-42', dimensions: ['api-key-42'] });
 * await redis.hget(keys.shardMarkerKey(shard), 'fence');
 * ```
 */
export interface KeyLayout {
  readonly prefix: string;
  /** Region meta: <prefix>:meta (region, fingerprint, started, fence, heard:<region>). */
  readonly metaKey: string;
  /** One gossip publisher per region at a time: <prefix>:meta:publisher. */
  readonly publisherLockKey: string;
  /** One process of the region runs the start-up check: <prefix>:meta:recovery. */
  readonly recoveryLockKey: string;
  /** A region without federation: the rules it last started with (recovery.ts checkStandaloneRules); not state. */
  readonly standaloneRulesKey: string;
  /**
   * The region's admin-added allow and deny entries (src/engine/admin-lists.ts): a HASH whose fields are
   * `<list>:<kind>:<value>` (`deny:ip:10.0.0.0/8`, `allow:apiKey:internal-batch`) and whose field `v` counts the
   * changes, so each process re-reads the whole hash only when `v` moved. One key: one slot on a Redis Cluster.
   */
  readonly listsKey: string;
  /**
   * The plan assignments of the admin API (src/engine/admin-plans.ts), in every region: a HASH with one field per
   * write, `a:<at ms>:<region>:<apiKey>` → `{"plan":…,"previous":…}` (the newest per API key wins), and the change
   * counter `v`, as listsKey. One key: one slot on a Redis Cluster.
   */
  readonly plansKey: string;
  /**
   * Assignments written in this region that a peer has not stored yet (src/federation/plan-gossip.ts): a HASH whose
   * fields are `<peer>|<field of plansKey>` and whose values are the write's; retried until the peer stores it.
   */
  readonly plansPendingKey: string;
  /** BullMQ's prefix of the gossip queues, {<prefix>}: hash-tagged so a queue lives in one cluster slot. */
  readonly gossipQueuePrefix: string;
  /** A SCAN pattern for every key of this deployment's own state (not the gossip queues): <prefix>:*. */
  readonly scanPattern: string;
  /** A SCAN pattern for the shard keys (state, markers, backlogs): <prefix>:{s*}:*. */
  readonly shardScanPattern: string;
  /** What a state key of this layout looks like. */
  readonly statePattern: RegExp;
  ruleKey(ruleName: string, identity: IdentityParts): string;
  /**
   * The state key and its shard, hashing the principal once (the decision path needs both), and the key's identity
   * hash (its last part: 16 base64url characters of SHA-256, a string read without copying the key).
   */
  stateKeyOf(ruleName: string, identity: IdentityParts): { key: string; shard: number; hash: string };
  /** A state key from its parts (the gossip wire, which carries no prefix). */
  stateKey(shard: number, ruleName: string, identityHash: string): string;
  /**
   * The recovery marker a shard's scripts read (hash: `fence`): <prefix>:{s0}:m for every shard of one redis-server,
   * which loses its data whole, so a decide batch reads one marker however many shards it spans; <prefix>:{s<n>}:m
   * per shard on a Redis Cluster, whose nodes lose data one by one (and whose scripts keep to one slot).
   */
  shardMarkerKey(shard: number): string;
  /** Pending-delivery ZSET of one shard for the peer with this region index. */
  peerPendingKey(shard: number, peerIndex: number): string;
  /** Keys of one shard whose last merge left a hungry peer in view: the sync loop rebalances them again. */
  watchSetKey(shard: number): string;
  /**
   * Fast-lane set <prefix>:{s<n>}:f: state keys to send to every peer now rather than at the next sync round (a
   * region's first admission of a key in a window/epoch, a grant made while applying gossip).
   */
  fastSetKey(shard: number): string;
  /**
   * The shard's bell <prefix>:{s<n>}:b: a list holding at most one element, pushed (lua/includes/bell.lua) by every
   * script that added a key to the shard's fast-lane set, a peer's pending set or the watch set, when it was empty.
   * The publisher blocks on the 64 bells (BLMPOP) instead of polling the sets.
   */
  bellKey(shard: number): string;
  /**
   * Refund marker <prefix>:{s<n>}:rf:<refund id>: written by refund.lua with its first run, so a refund the client
   * sends again (ioredis resends unanswered commands after a reconnect) returns nothing twice. Expires after
   * REFUND_MARK_MS.
   */
  refundMarkerKey(shard: number, refundId: string): string;
  /** Sequence numbers of gossip jobs applied from one region (replay protection): <prefix>:seen:<region>. */
  replayKey(from: string): string;
}

const layouts = new Map<string, KeyLayout>();

/** How a deployment's Redis is laid out beyond its prefix. */
export interface KeyLayoutOptions {
  /** A Redis Cluster (`redis.clusterNodes`): each shard keeps its own recovery marker, in its own slot. */
  cluster?: boolean;
}

/**
 * The key layout under `prefix` (validated: KEY_PREFIX_PATTERN). Layouts are immutable and shared per prefix and
 * kind of Redis.
 *
 * @example
 * ```ts
 * keyLayout('billing').shardMarkerKey(3); // 'billing:{s0}:m' (one redis-server: one marker)
 * keyLayout('billing', { cluster: true }).shardMarkerKey(3); // 'billing:{s3}:m'
 * ```
 */
export function keyLayout(prefix: string = DEFAULT_KEY_PREFIX, options: KeyLayoutOptions = {}): KeyLayout {
  const cluster = options.cluster === true;
  const known = layouts.get(cluster ? `${prefix} cluster` : prefix);
  if (known) return known;
  if (!KEY_PREFIX_PATTERN.test(prefix)) throw new Error(`not a key prefix (letters, digits, "_" and "-", 1-32): ${prefix}`);
  const shardKey = (shard: number, suffix: string) => `${prefix}:${shardTag(shard)}:${suffix}`;
  const stateKeyOf = (ruleName: string, identity: IdentityParts) => {
    const shard = shardOf(identity.principal);
    const hash = identityHash(ruleName, identity.dimensions);
    return { key: shardKey(shard, `${ruleName}:${hash}`), shard, hash };
  };
  const meta = `${prefix}:meta`;
  const oneMarker = shardKey(0, 'm');
  const layout: KeyLayout = {
    prefix,
    metaKey: meta,
    publisherLockKey: `${meta}:publisher`,
    recoveryLockKey: `${meta}:recovery`,
    standaloneRulesKey: `${meta}:rules`,
    listsKey: `${prefix}:lists`,
    plansKey: `${prefix}:plans`,
    plansPendingKey: `${prefix}:plans:pending`,
    gossipQueuePrefix: `{${prefix}}`,
    scanPattern: `${prefix}:*`,
    shardScanPattern: `${prefix}:{s*}:*`,
    statePattern: new RegExp(`^${prefix}:\\{s\\d{1,3}\\}:[A-Za-z0-9_.-]{1,64}:[A-Za-z0-9_-]{16}$`),
    ruleKey: (ruleName, identity) => stateKeyOf(ruleName, identity).key,
    stateKeyOf,
    stateKey: (shard, ruleName, hashed) => shardKey(shard, `${ruleName}:${hashed}`),
    shardMarkerKey: cluster ? (shard) => shardKey(shard, 'm') : () => oneMarker,
    peerPendingKey: (shard, peerIndex) => shardKey(shard, `p:${peerIndex}`),
    watchSetKey: (shard) => shardKey(shard, 'w'),
    fastSetKey: (shard) => shardKey(shard, 'f'),
    bellKey: (shard) => shardKey(shard, 'b'),
    refundMarkerKey: (shard, refundId) => shardKey(shard, `rf:${refundId}`),
    replayKey: (from) => `${prefix}:seen:${from}`,
  };
  layouts.set(cluster ? `${prefix} cluster` : prefix, layout);
  return layout;
}

/**
 * The key layout of a config (`redis.keyPrefix`; the default prefix for a config without one, e.g. `{ rules }`).
 *
 * @example
 * ```ts
 * const keys = layoutOf(config);
 * await redis.hget(keys.metaKey, 'fingerprint');
 * ```
 */
export function layoutOf(config: {
  readonly redis?: { readonly keyPrefix?: string | undefined; readonly clusterNodes?: readonly string[] | undefined } | undefined;
}): KeyLayout {
  const nodes = config.redis?.clusterNodes;
  return keyLayout(config.redis?.keyPrefix ?? DEFAULT_KEY_PREFIX, { cluster: nodes !== undefined && nodes.length > 0 });
}

const KEY_HEAD = /^([A-Za-z0-9_-]{1,32}):\{s(\d+)\}:/;

/** The shard a state key (or any shard key) lives in, whatever its prefix. */
export function shardOfKey(stateKey: string): number {
  const match = KEY_HEAD.exec(stateKey);
  if (!match) throw new Error(`not a quotafed state key: ${stateKey}`);
  return Number(match[2]);
}

/**
 * The one-server layout a state key's prefix names: its sibling keys (backlogs, watch set, fast lane, bell) share
 * it. Not its marker, which also depends on the kind of Redis: take that from layoutOf(config).
 */
export function layoutOfKey(stateKey: string): KeyLayout {
  const match = KEY_HEAD.exec(stateKey);
  if (!match) throw new Error(`not a quotafed state key: ${stateKey}`);
  return keyLayout(match[1]);
}

/** Any quotafed state key, whatever its prefix (bodies naming a lease key, before the layout is known). */
export const STATE_KEY_PATTERN = /^[A-Za-z0-9_-]{1,32}:\{s\d{1,3}\}:[A-Za-z0-9_.-]{1,64}:[A-Za-z0-9_-]{16}$/;

// The default layout's keys as plain exports: for tests and tools that work on a default deployment. Code that
// serves a config takes layoutOf(config) instead.
const DEFAULT_LAYOUT = keyLayout(DEFAULT_KEY_PREFIX);
export const KEY_PREFIX = DEFAULT_LAYOUT.prefix;
export const META_KEY = DEFAULT_LAYOUT.metaKey;
export const GOSSIP_QUEUE_PREFIX = DEFAULT_LAYOUT.gossipQueuePrefix;
export const LISTS_KEY = DEFAULT_LAYOUT.listsKey;
export const PLANS_KEY = DEFAULT_LAYOUT.plansKey;
export const PLANS_PENDING_KEY = DEFAULT_LAYOUT.plansPendingKey;
export const PUBLISHER_LOCK_KEY = DEFAULT_LAYOUT.publisherLockKey;
export const RECOVERY_LOCK_KEY = DEFAULT_LAYOUT.recoveryLockKey;
export const { ruleKey, stateKeyOf, shardMarkerKey, peerPendingKey, watchSetKey, fastSetKey, bellKey, refundMarkerKey, replayKey } =
  DEFAULT_LAYOUT;

// Recovery after data loss. A region whose Redis lost its data must not hand out what it had
// already admitted a second time. At start-up, a missing start-up marker in <prefix>:meta means either a brand-new
// region or a Redis that lost its data; the peers tell the two apart (each records, in its own <prefix>:meta, when it
// last heard from us). If any peer has heard of us, or a peer cannot be asked, the data is taken as lost: every
// shard marker gets `fence = now` (Redis TIME), so decide.lua admits nothing in the windows that began before
// it and token buckets start empty at the fence, and each peer is asked to resync (resync.ts) so this region's
// views, its own row as the peers saw it included, are rebuilt within a few sync intervals.
// While running, the same loss is detected by the start-up marker disappearing (FLUSHALL, a restart without
// persistence under a running service); decide.lua and apply_gossip.lua fence a shard the moment they find its
// marker missing, and this module then fences the rest and asks for the resync.
// A brand-new federation can say so (`serve --new-federation`, `federation.bootstrap: new`): peers that cannot
// be asked then do not fence, as long as no peer has heard of this region and this Redis holds no quotafed
// state at all (docs/federation.md §4a argues why the bound holds).
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';
import { FEDERATED_ALGORITHMS, type Config } from '../config/schema.ts';
import { randomUUID } from 'node:crypto';
import { orAfter } from '../deadline.ts';
import { KEY_SHARDS, keyLayout, layoutOf, type KeyLayout } from '../keys.ts';
import { heardField } from './gossip/apply.ts';
import { heartbeatIntervalMs } from './peers.ts';
import { peerTargets, probeConnection, type GossipTarget } from './gossip/connections.ts';
import type { Topology } from '../protocol/index.ts';

/** Meta field written once the region's state is known good (its presence means "no loss since"). */
export const STARTED_FIELD = 'started';
/** Meta field: the run_id of the Redis process (every primary's, on a cluster) the state was last known good on. */
export const RUN_ID_FIELD = 'runId';

/** Meta field: what each rule's state is counted under (algorithm and period, by rule name), as JSON. */
export const RULE_SHAPES_FIELD = 'ruleShapes';

/** Each rule's algorithm and period by name: a state key holds the rule's name only. */
export function ruleShapes(config: Pick<Config, 'rules'>): Record<string, string> {
  return Object.fromEntries(config.rules.map((rule) => [rule.name, `${rule.algorithm}/${rule.period}`]));
}

/** The rules whose algorithm or period differ under the same name between a recorded and the current shapes. */
function redefined(recorded: string | null, current: Record<string, string>): string[] {
  if (recorded === null) return [];
  let before: Record<string, unknown>;
  try {
    before = JSON.parse(recorded) as Record<string, unknown>;
  } catch {
    return [];
  }
  return Object.entries(current)
    .filter(([name, shape]) => typeof before[name] === 'string' && before[name] !== shape)
    .map(([name, shape]) => `"${name}" (${String(before[name])} -> ${shape})`);
}

/**
 * A region without peers has no fence to put on its windows: it starts a rule redefined under its name on the state
 * the old definition left (a window rule of another algorithm or period reads no count of the old one and starts
 * over, as a renamed rule would; a token bucket keeps its tokens, capped at the new burst). This says so in one
 * log line per start (`rules.redefined`) and records the rules it runs now. Returns the redefined rules.
 *
 * @example
 * await checkStandaloneRules({ config, redis, logger }); // at start-up, before the listener opens
 */
export async function checkStandaloneRules(deps: { config: Config; redis: Redis | Cluster; logger: Logger }): Promise<string[]> {
  const { config, redis, logger } = deps;
  const recordKey = layoutOf(config).standaloneRulesKey;
  const current = ruleShapes(config);
  const changed = redefined(await redis.get(recordKey), current);
  if (changed.length > 0) {
    logger.warn(
      { event: 'rules.redefined', rules: changed },
      `rules were redefined under the same name since this region last ran (${changed.join(', ')}): a window rule of another ` +
        'algorithm or period starts its counts over in the current window, as a new rule would; a token bucket keeps its tokens',
    );
  }
  await redis.set(recordKey, JSON.stringify(current));
  return changed;
}

export type PeerAnswer = 'heard' | 'never' | 'unreachable';

export interface RecoveryResult {
  /** True when this Redis was found to have lost data and the shards were fenced. */
  fenced: boolean;
  /** The fence written (ms, Redis TIME), 0 when none. */
  fence: number;
  answers: Record<string, PeerAnswer>;
  /** Why the region fenced, or why it started without a fence (for logs, status and tests). */
  reason?: string;
  /** A brand-new federation was declared and honoured (it decided a start that would otherwise have fenced). */
  declaredNew?: boolean;
}

async function redisNow(redis: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** What a peer's Redis says of this region, and the topology fingerprint the peer last started with (null: none). */
export interface PeerReply {
  answer: PeerAnswer;
  fingerprint: string | null;
  /** How long ago (ms, by the peer's Redis clock) the peer's state was last marked good; null: it holds none. */
  startedAgoMs: number | null;
}

/**
 * Has the peer's Redis heard of `region`, and under which topology did the peer last start? Any doubt (timeout,
 * refused, error) answers 'unreachable'. A cluster peer is asked through a cluster connection: <prefix>:meta lives
 * in one slot, and a single node would answer MOVED. The peer's meta is read under `keys` (this region's prefix:
 * every region of a federation uses the same `redis.keyPrefix`).
 */
export async function askPeerReply(peer: GossipTarget | string, region: string, timeoutMs: number, keys: KeyLayout): Promise<PeerReply> {
  const connection = probeConnection(typeof peer === 'string' ? { redisUrl: peer } : peer, timeoutMs);
  connection.on('error', () => undefined);
  const unreachable: PeerReply = { answer: 'unreachable', fingerprint: null, startedAgoMs: null };
  // A cluster's connect walks the seeds one by one: bound the whole question, not each step.
  const question = (async (): Promise<PeerReply> => {
    await connection.connect();
    const [heard, fingerprint, started] = await connection.hmget(keys.metaKey, heardField(region), 'fingerprint', STARTED_FIELD);
    const startedAgoMs = started == null ? null : Math.max(0, (await redisNow(connection)) - Number(started));
    return { answer: heard === null ? 'never' : 'heard', fingerprint: started == null ? null : (fingerprint ?? null), startedAgoMs };
  })().catch((): PeerReply => unreachable);
  try {
    return await orAfter(question, 2 * timeoutMs, unreachable);
  } finally {
    connection.disconnect();
  }
}

/** Has the peer's Redis heard of `region`? (askPeerReply's answer; under the default prefix unless `keys` says.) */
export async function askPeer(
  peer: GossipTarget | string,
  region: string,
  timeoutMs: number,
  keys: KeyLayout = keyLayout(),
): Promise<PeerAnswer> {
  return (await askPeerReply(peer, region, timeoutMs, keys)).answer;
}

/**
 * Which Redis process holds this region's state: its run_id, or every primary's (sorted) on a cluster. A restart,
 * a snapshot reload or a failover gives another value.
 */
export async function redisRunId(redis: Redis | Cluster): Promise<string> {
  const nodes: Redis[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const ids = await Promise.all(nodes.map(async (node) => /^run_id:(\w+)/m.exec(await node.info('server'))?.[1] ?? 'unknown'));
  return ids.sort().join(',');
}

/**
 * Why state that survived (the start-up marker is there) cannot be trusted for the current windows, or undefined
 * when it can:
 * - the topology changed (regions or weights): cells are addressed by region index, so the current windows'
 *   counts and transfers would be read under another layout;
 * - the Redis is another process than the one the state was last known good on (restarted from a snapshot or an
 *   AOF that is not fsynced on every write, or a replica promoted), unless `redis.durable` says it loses nothing.
 */
export async function survivedStateDoubt(deps: Pick<RecoveryDeps, 'config' | 'topology' | 'redis'>): Promise<string | undefined> {
  const { config, topology, redis } = deps;
  const [fingerprint, runId, shapes] = await redis.hmget(layoutOf(config).metaKey, 'fingerprint', RUN_ID_FIELD, RULE_SHAPES_FIELD);
  if (fingerprint !== null && fingerprint !== topology.fingerprint) {
    return (
      `the federation's regions or weights changed since this region last ran (topology fingerprint ${fingerprint} -> ` +
      `${topology.fingerprint}): the current windows were counted under the old layout`
    );
  }
  const changed = redefined(shapes ?? null, ruleShapes(config));
  if (changed.length > 0) {
    return (
      `rules were redefined under the same name since this region last ran (${changed.join(', ')}): their state was ` +
      'counted under the old algorithm or period'
    );
  }
  if (runId !== null) {
    const now = await redisRunId(redis);
    if (now !== runId) {
      const notDurable = config.redis.durable ? await persistenceBelowDurable(redis) : undefined;
      if (!config.redis.durable || notDurable !== undefined) {
        return (
          `this Redis is another process than the one the state was last known good on (run_id ${runId} -> ${now}): ` +
          'it restarted or failed over and may have come back from a snapshot without the latest admissions ' +
          (notDurable !== undefined
            ? `(redis.durable is set, but this Redis runs ${notDurable}: the declaration is not believed)`
            : '(set redis.durable only for AOF with appendfsync always and no lagging failover)')
        );
      }
    }
  }
  return undefined;
}

/**
 * What a Redis that `redis.durable` calls lossless actually persists with, when that can lose acknowledged writes
 * (`appendonly no`, or `appendfsync` other than `always`, on any primary); undefined when it cannot, or when CONFIG
 * GET is not allowed (a managed Redis, an ACL user without it: the declaration is then taken at its word).
 */
async function persistenceBelowDurable(redis: Redis | Cluster): Promise<string | undefined> {
  const nodes: Redis[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    let reply: unknown;
    try {
      reply = await node.call('CONFIG', 'GET', 'append*');
    } catch {
      return undefined;
    }
    const pairs = Array.isArray(reply) ? (reply as string[]) : [];
    const value = (name: string) => pairs[pairs.indexOf(name) + 1];
    const appendonly = pairs.includes('appendonly') ? value('appendonly') : undefined;
    const appendfsync = pairs.includes('appendfsync') ? value('appendfsync') : undefined;
    if (appendonly === undefined || appendfsync === undefined) return undefined;
    if (appendonly !== 'yes' || appendfsync !== 'always') return `appendonly ${appendonly}, appendfsync ${appendfsync}`;
  }
  return undefined;
}

/** True while the start-up marker is present (no data loss since this region last started). */
export async function stateIntact(redis: Redis | Cluster, keys: KeyLayout): Promise<boolean> {
  return (await redis.hexists(keys.metaKey, STARTED_FIELD)) === 1;
}

/**
 * Fences every shard at Redis TIME. `overwrite` replaces existing markers (start-up: a marker that survived a
 * partial loss proves nothing); otherwise markers that decide/apply recreated since the loss are kept (their
 * fences are already later than the loss).
 */
async function fenceAllShards(redis: Redis | Cluster, keys: KeyLayout, overwrite: boolean): Promise<number> {
  const now = await redisNow(redis);
  await Promise.all(
    Array.from({ length: KEY_SHARDS }, (_, shard) =>
      overwrite ? redis.hset(keys.shardMarkerKey(shard), 'fence', now) : redis.hsetnx(keys.shardMarkerKey(shard), 'fence', now),
    ),
  );
  return now;
}

/**
 * Marks every shard as never having lost data (fence 0): what a brand-new region does, and what the chaos lab and
 * the benchmarks do to a Redis they just emptied (a fresh run is not a data loss). Under the default prefix unless
 * `keys` says.
 */
export async function markShardsIntact(redis: Redis | Cluster, keys: KeyLayout = keyLayout()): Promise<void> {
  await Promise.all(Array.from({ length: KEY_SHARDS }, (_, shard) => redis.hset(keys.shardMarkerKey(shard), 'fence', 0)));
}

async function markStarted(redis: Redis | Cluster, config: Config, topology: Topology, fence: number): Promise<void> {
  const [now, runId] = await Promise.all([redisNow(redis), redisRunId(redis)]);
  await redis.hset(
    layoutOf(config).metaKey,
    'region',
    config.region,
    'fingerprint',
    topology.fingerprint,
    'fence',
    fence,
    STARTED_FIELD,
    now,
    RUN_ID_FIELD,
    runId,
    RULE_SHAPES_FIELD,
    JSON.stringify(ruleShapes(config)),
  );
}

export interface RecoveryDeps {
  config: Config;
  topology: Topology;
  redis: Redis | Cluster;
  logger: Logger;
  /** Per-peer question timeout. */
  timeoutMs?: number;
  /** The operator declared a brand-new federation (`serve --new-federation` or `federation.bootstrap: new`). */
  declaredNew?: boolean;
}

/**
 * Some key of this region's own quotafed state (`<prefix>:*`: meta, shard markers, rule state, backlogs, replay
 * records), or null when there is none. Gossip queued by peers (`{<prefix>}` BullMQ keys) is not this region's
 * state, nor is another deployment's under another prefix. A Redis Cluster is scanned on every primary.
 */
async function findQuotafedState(redis: Redis | Cluster, keys: KeyLayout): Promise<string | null> {
  const nodes: Redis[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', keys.scanPattern, 'COUNT', 1_000);
      // Locks are coordination between this region's processes, and a standalone start's record of its rules is
      // not state either.
      const state = found.find((key) => key !== keys.recoveryLockKey && key !== keys.publisherLockKey && key !== keys.standaloneRulesKey);
      if (state !== undefined) return state;
      cursor = next;
    } while (cursor !== '0');
  }
  return null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Several processes of one region (`serve --workers`, instances sharing the Redis) start at once: one runs the
 * start-up check, the others wait for its outcome. Without this, a process could find the markers its sibling
 * just wrote and take them for leftover state. Resolves with the sibling's outcome, or null: run it here
 * (the lock is then held by this process until `release`).
 */
async function startUpTurn(redis: Redis | Cluster, keys: KeyLayout, owner: string, lockMs: number): Promise<RecoveryResult | null> {
  if ((await redis.set(keys.recoveryLockKey, owner, 'PX', lockMs, 'NX')) === 'OK') return null;
  const deadline = Date.now() + lockMs;
  while (Date.now() < deadline) {
    await sleep(100);
    if (await stateIntact(redis, keys)) {
      const fence = Number((await redis.hget(keys.metaKey, 'fence')) ?? 0);
      return { fenced: fence > 0, fence, answers: {}, reason: 'another process of this region ran the start-up check' };
    }
    // The holder failed before deciding: take over.
    if ((await redis.set(keys.recoveryLockKey, owner, 'PX', lockMs, 'NX')) === 'OK') return null;
  }
  return null;
}

async function releaseTurn(redis: Redis | Cluster, keys: KeyLayout, owner: string): Promise<void> {
  if ((await redis.get(keys.recoveryLockKey)) === owner) await redis.del(keys.recoveryLockKey);
}

/** Until when each federated rule admits nothing after a fence (window end; token bucket: its fenceEnd). */
function fencedUntil(config: Config, fence: number): Record<string, string> {
  const until: Record<string, string> = {};
  for (const rule of config.rules) {
    if (!FEDERATED_ALGORITHMS.has(rule.algorithm)) continue;
    const end =
      (Math.floor(fence / rule.period) + 1) * rule.period + (rule.algorithm === 'tokenBucket' ? config.federation.maxClockSkewMs : 0);
    until[rule.name] = new Date(end).toISOString();
  }
  return until;
}

/** The one warn line a fence gets: why, which shards, from when, and until when each rule admits nothing. */
function logFence(logger: Logger, config: Config, fence: number, reason: string, fields: Record<string, unknown>): void {
  const until = fencedUntil(config, fence);
  const latest = Object.values(until).sort().at(-1);
  logger.warn(
    { event: 'federation.fenced', reason, shards: `all ${KEY_SHARDS}`, fence: new Date(fence).toISOString(), until, ...fields },
    `fencing all ${KEY_SHARDS} shards at ${new Date(fence).toISOString()}: ${reason}. Windows that began before the fence admit nothing ` +
      `and token buckets start empty (until ${latest ?? 'the end of the current window'}, per rule in "until")`,
  );
}

/** Run before the region gossips (and ideally before it serves): decides whether this Redis lost data. */
export async function recoverOnStart(deps: RecoveryDeps): Promise<RecoveryResult> {
  const { redis } = deps;
  const keys = layoutOf(deps.config);
  if (await stateIntact(redis, keys)) return fenceIfDoubted(deps);
  const timeoutMs = deps.timeoutMs ?? 2_000;
  const owner = randomUUID();
  // Each peer question is bounded by 2 × timeoutMs and they run in parallel.
  const sibling = await startUpTurn(redis, keys, owner, 4 * timeoutMs + 10_000);
  if (sibling) return sibling;
  try {
    if (await stateIntact(redis, keys)) return await fenceIfDoubted(deps);
    return await checkOnStart(deps, timeoutMs);
  } finally {
    await releaseTurn(redis, keys, owner).catch(() => undefined);
  }
}

/** State survived: fences anyway when it cannot be trusted for the current windows (survivedStateDoubt). */
async function fenceIfDoubted(deps: RecoveryDeps): Promise<RecoveryResult> {
  const reason = await survivedStateDoubt(deps);
  const keys = layoutOf(deps.config);
  if (reason === undefined) {
    // Record the Redis process the state is known good on (a state written before run_ids were recorded).
    if ((await deps.redis.hexists(keys.metaKey, RUN_ID_FIELD)) === 0)
      await deps.redis.hset(keys.metaKey, RUN_ID_FIELD, await redisRunId(deps.redis));
    // What this start counts under (new rules join; a rule gone stays out of the next comparison).
    await deps.redis.hset(keys.metaKey, RULE_SHAPES_FIELD, JSON.stringify(ruleShapes(deps.config)));
    return { fenced: false, fence: 0, answers: {} };
  }
  const fence = await fenceAllShards(deps.redis, keys, true);
  logFence(deps.logger, deps.config, fence, reason, {});
  await markStarted(deps.redis, deps.config, deps.topology, fence);
  return { fenced: true, fence, answers: {}, reason };
}

/**
 * The running region's Redis came back after its connection closed: if it is another process now (or the topology
 * changed), the current windows are fenced as at start-up. Resolves with the fence, or 0 when none was needed.
 */
export async function recheckAfterReconnect(deps: RecoveryDeps): Promise<number> {
  if (!(await stateIntact(deps.redis, layoutOf(deps.config)))) return 0; // the vanished marker has its own path (recoverWhileRunning)
  const result = await fenceIfDoubted(deps);
  return result.fence;
}

/**
 * How long a peer must have run with its state intact before its "never heard of you" counts: a few heartbeats
 * (an idle region sends one every heartbeatIntervalMs) and the clock skew. A peer that ran that long while this
 * region ran would have heard of it.
 */
export function vouchAfterMs(config: Pick<Config, 'federation'>): number {
  return 3 * heartbeatIntervalMs(config.federation.syncIntervalMs) + config.federation.maxClockSkewMs;
}

/** Whether a peer's "never heard of you" is evidence that this region is new: its own state is older than vouchAfterMs. */
function vouches(reply: PeerReply, config: Pick<Config, 'federation'>): boolean {
  return reply.startedAgoMs !== null && reply.startedAgoMs >= vouchAfterMs(config);
}

async function checkOnStart(deps: RecoveryDeps, timeoutMs: number): Promise<RecoveryResult> {
  const { config, topology, redis, logger } = deps;
  const keys = layoutOf(config);
  const replies = await Promise.all(
    peerTargets(config).map(async (peer) => [peer.name, await askPeerReply(peer, config.region, timeoutMs, keys)] as const),
  );
  const entries = replies.map(([name, reply]) => [name, reply.answer] as const);
  const answers = Object.fromEntries(entries) as Record<string, PeerAnswer>;
  // Peers that run under another topology: this region joins a federation whose current windows were counted
  // without it (or with other weights), so its own share of them may already be spent.
  const otherTopology = replies.filter(([, reply]) => reply.fingerprint !== null && reply.fingerprint !== topology.fingerprint);
  const named = (answer: PeerAnswer) => entries.filter(([, a]) => a === answer).map(([name]) => name);
  const heard = named('heard');
  const unreachable = named('unreachable');
  let reason: string | undefined;
  let declaredNew = false;
  if (otherTopology.length > 0) {
    reason =
      `${otherTopology.map(([name]) => name).join(', ')} last started under another topology (fingerprint ` +
      `${otherTopology.map(([, reply]) => reply.fingerprint).join(', ')}, this region ${topology.fingerprint}): ` +
      `${config.region} joins a running federation whose current windows were counted without its layout`;
    if (deps.declaredNew) reason += ' (the new-federation declaration is overruled)';
  } else if (heard.length > 0) {
    reason =
      `this Redis has no start-up marker (${keys.metaKey} "${STARTED_FIELD}") but ${heard.join(', ')} heard of ` +
      `${config.region} before: its data was lost`;
    if (deps.declaredNew) reason += ' (the new-federation declaration is overruled: this federation has run before)';
  } else if (unreachable.length === 0 && !deps.declaredNew && replies.every(([, reply]) => !vouches(reply, config))) {
    // Every peer says "never heard of you", but every one of them is new itself: all regions may have lost their
    // data together (issue 21, item 7), and their silence proves nothing.
    reason =
      `this Redis has no start-up marker (${keys.metaKey} "${STARTED_FIELD}") and no peer has heard of ${config.region}, but every ` +
      `peer (${replies.map(([name]) => name).join(', ')}) is new as well (no start-up marker, or one younger than ` +
      `${vouchAfterMs(config)} ms): a brand-new federation and one whose regions all lost their data together look the same, ` +
      'so a data loss cannot be ruled out (a brand-new federation: start with --new-federation or set federation.bootstrap: new)';
  } else if (unreachable.length > 0) {
    const leftover = deps.declaredNew ? await findQuotafedState(redis, keys) : null;
    if (!deps.declaredNew) {
      reason =
        `this Redis has no start-up marker (${keys.metaKey} "${STARTED_FIELD}") and ${unreachable.join(', ')} could not be asked whether ` +
        `they know ${config.region}, ` +
        'so a data loss cannot be ruled out (a brand-new federation: start with --new-federation or set federation.bootstrap: new)';
    } else if (leftover !== null) {
      reason =
        `a new federation was declared, but this Redis already holds quotafed state (${leftover}) without a start-up marker and ` +
        `${unreachable.join(', ')} could not be asked: a partial data loss cannot be ruled out (empty this ` +
        `Redis first if it really is new)`;
    } else {
      declaredNew = true;
    }
  }
  let fence = 0;
  if (reason !== undefined) {
    fence = await fenceAllShards(redis, keys, true);
    logFence(logger, config, fence, reason, { answers, declaredNew: deps.declaredNew === true });
  } else {
    // A new region: fence 0 everywhere. A marker a decision created before this check (the service may serve
    // before the federation starts) carries a spurious fence: nothing was lost, so it is reset too.
    await markShardsIntact(redis, keys);
    if (declaredNew) {
      reason =
        `new federation declared; ${unreachable.join(', ')} not reachable yet, no peer has heard of ${config.region} and this ` +
        `Redis holds no quotafed state`;
      logger.warn({ event: 'federation.fresh_start', declaredNew: true, answers }, `starting fresh without a fence: ${reason}`);
    } else {
      reason = `no peer has heard of ${config.region}`;
      logger.info({ event: 'federation.fresh_start', answers }, 'no peer has heard of this region: starting fresh');
    }
  }
  await markStarted(redis, config, topology, fence);
  return { fenced: fence > 0, fence, answers, reason, ...(declaredNew ? { declaredNew } : {}) };
}

/** The running region found its start-up marker gone: its Redis lost data under it. */
export async function recoverWhileRunning(deps: RecoveryDeps): Promise<number> {
  const fence = await fenceAllShards(deps.redis, layoutOf(deps.config), false);
  await markStarted(deps.redis, deps.config, deps.topology, fence);
  logFence(
    deps.logger,
    deps.config,
    fence,
    'the start-up marker vanished while running: Redis lost data under this service; asking peers to resync',
    {
      whileRunning: true,
    },
  );
  return fence;
}

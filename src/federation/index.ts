// The federation of one region: recovery at start-up, the inbound gossip worker, the outbound publisher loop,
// per-peer status and metrics. Nothing here is on the request path: decisions only read and write the
// region's own Redis; this module moves state between regions' Redis servers in the background.
import { Cluster, type Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import { layoutOf, shardOfKey } from '../keys.ts';
import type { Config } from '../config/schema.ts';
import { orAfter } from '../deadline.ts';
import { waitReady, type RegionRedis } from '../store/client.ts';
import { SCRIPTS, withScripts, type ScriptedRedis } from '../store/commands.ts';
import { silentLogger, type Logger } from '../log.ts';
import { registry as sharedRegistry } from '../metrics.ts';
import { createApplier, type InProcessPublisher } from './gossip/apply.ts';
import { peerTargets } from './gossip/connections.ts';
import { createFingerprintWatch } from './fingerprints.ts';
import { createPrefixWatch } from './prefix-watch.ts';
import { createRuleWatch } from './rule-watch.ts';
import { parseRuleTerms, RULE_TERMS_FIELD, ruleFingerprints, ruleTermsOf, tightenRules, type RuleTerms } from './rule-identity.ts';
import { createPublisherLock, publisherLockTtlMs, standbyRoundMs } from './gossip/lock.ts';
import { createPeerLink, type PeerLink } from './gossip/peer-link.ts';
import { markLanesWithWork, markShardLanes, maskLanes, startBellWaiter, type BellWaiter } from './gossip/bells.ts';
import { createDirtyShards, pollingShards } from './gossip/dirty-shards.ts';
import { FAST_LANE_MS } from './gossip/fast-lane.ts';
import { createFastPace } from './gossip/fast-pace.ts';
import { createPublisher } from './gossip/publisher.ts';
import { startGossipWorker, type GossipWorker } from './gossip/worker.ts';
import { federationMetrics } from './metrics.ts';
import { createPeerBook, heartbeatIntervalMs, type PeerStatus } from './peers.ts';
import {
  checkStandaloneRules,
  recheckAfterReconnect,
  recoverOnStart,
  recoverWhileRunning,
  stateIntact,
  type RecoveryResult,
} from './recovery.ts';
import { markAllPending } from './resync.ts';
import { topologyOf, type Topology } from '../protocol/index.ts';

export type { PeerStatus } from './peers.ts';
export type { RecoveryResult } from './recovery.ts';

export interface FederationOptions {
  config: Config;
  /** The region's Redis client; the federation duplicates it with a command timeout fit for batches. */
  redis: RegionRedis;
  logger?: Logger;
  /** Where the federation metrics go; the shared registry of src/metrics.ts when omitted. */
  registry?: Registry;
  /** Declared a brand-new federation for this start (`serve --new-federation`); else `federation.bootstrap`. */
  newFederation?: boolean;
}

export interface Federation {
  readonly topology: Topology;
  /** Outcome of the start-up recovery check (undefined while Redis was not reachable yet). */
  readonly recovery: RecoveryResult | undefined;
  /** Runs one publishing round now (after any round in progress); graceful shutdown and tests use it. */
  flush(): Promise<void>;
  /**
   * Policy reload: gossip from now on applies, sweeps and resyncs with these rules. Only rules and budgets
   * change; regions, weights and the secret need a restart (the reloader rejects such changes).
   */
  updateRules(next: Config): void;
  /**
   * The rules to decide with for `config`: a rule a peer runs with other parameters (a reload one region at a time)
   * at the smallest limit, burst and budget of the two, from the terms each peer publishes (rule-identity.ts
   * `tightenRules`); `config` itself when every peer agrees. The region's engine decides with this.
   */
  tighten(config: Config): Config;
  /** Called when what `tighten` returns changed (a peer reloaded a rule, or agrees again). */
  onTightened(listener: () => void): void;
  /** Stops the loop, flushes once (bounded), closes the worker, the peer queues and the federation's client. */
  close(): Promise<void>;
  status(): PeerStatus[];
  /** Why the federation is not ready (a peer with another topology fingerprint); empty when it is. */
  problems(): string[];
  /**
   * What an operator should know but that leaves the region ready: a peer that runs a rule with other parameters
   * (a reload one region at a time; rule-watch.ts). Shown on /readyz as `warnings`.
   */
  warnings(): string[];
}

/** How often peers' published topology fingerprints are read (and once at start-up). */
const FINGERPRINT_CHECK_MS = 5_000;

/** Bounds on background work, derived from the sync interval. */
const COMMAND_TIMEOUT_MS = 5_000;

/**
 * How often every shard is looked at whatever its bell said (a safety net for a bell lost with a reply; on a single
 * Redis one EXISTS per lane finds the lanes with any work).
 */
const FULL_PASS_MS = 10_000;

/**
 * How often a process that does not publish (a standby: another gateway of the region holds the publisher lock)
 * counts the pending sets for its backlog gauge: a count is one ZCARD per shard and peer (128 for two peers), and a
 * region may run dozens of gateways. The publisher's own gauge follows its drains.
 */
const STANDBY_BACKLOG_MS = 60_000;

function duplicateClient(redis: RegionRedis): RegionRedis {
  const overrides = { commandTimeout: COMMAND_TIMEOUT_MS, enableAutoPipelining: true };
  if (!(redis instanceof Cluster)) return (redis as Redis).duplicate(overrides);
  // On a cluster, script calls stay out of auto-pipelines: ioredis would bucket them by their key count, not
  // their keys, and refuse pipelines spanning primaries (see createRegionRedis).
  return redis.duplicate(undefined, {
    enableAutoPipelining: true,
    autoPipeliningIgnoredCommands: Object.keys(SCRIPTS),
    redisOptions: { commandTimeout: COMMAND_TIMEOUT_MS },
  });
}

function idleFederation(topology: Topology): Federation {
  return {
    topology,
    recovery: undefined,
    flush: async () => undefined,
    updateRules: () => undefined,
    tighten: (config) => config,
    onTightened: () => undefined,
    close: async () => undefined,
    status: () => [],
    problems: () => [],
    warnings: () => [],
  };
}

export async function startFederation(options: FederationOptions): Promise<Federation> {
  const { config } = options;
  // The rules in force; a policy reload replaces it (everything else in `config` is fixed until a restart).
  let current = config;
  const topology = topologyOf(config);
  if (topology.regions.length <= 1) {
    // A region on its own: no recovery check, but a rule redefined since its last start is said (recovery.ts).
    const checked = checkStandaloneRules({ config, redis: options.redis, logger: options.logger ?? silentLogger() }).catch(
      (error: Error) =>
        void options.logger?.warn({ event: 'rules.check_failed', error: error.message }, 'could not compare the rules with the last start'),
    );
    await orAfter(checked, config.redis.connectTimeoutMs, undefined);
    return idleFederation(topology);
  }
  // Every key this federation reads or writes, here and on the peers (all regions use the same redis.keyPrefix).
  const keys = layoutOf(config);
  const logger = (options.logger ?? silentLogger()).child({ module: 'federation' });
  const metrics = federationMetrics(options.registry ?? sharedRegistry);
  const interval = config.federation.syncIntervalMs;

  if (config.federation.secret === undefined) {
    logger.warn({ event: 'federation.unsigned' }, 'federation.secret is not set: gossip is not authenticated (set it in production)');
  }

  const local: ScriptedRedis = withScripts(duplicateClient(options.redis));
  local.on('error', (error: Error) =>
    logger.debug({ event: 'federation.redis_error', error: error.message }, 'federation Redis client error'),
  );
  await waitReady(local, config.redis.connectTimeoutMs).catch(() => undefined);
  // A connection that closed may come back to another Redis process (a restart from a snapshot, a failover), with
  // every marker in place: the next round checks which process it is before anything else.
  let recheckRedis = false;
  local.on('close', () => {
    recheckRedis = true;
  });

  const peerList = peerTargets(config).map((peer) => ({ ...peer, index: topology.regions.indexOf(peer.name) }));
  const peers = createPeerBook(config.region, peerList, metrics, logger);
  const addTimeoutMs = Math.max(1_000, 5 * interval);
  const links: PeerLink[] = peerList.map((peer) => createPeerLink(peer, addTimeoutMs, logger, keys));
  // On a single Redis the publisher waits on the shards' bells and looks only at the shards that rang; a multi-key
  // blocking read cannot span a cluster's slots, so on a Redis Cluster every lane polls every shard.
  const bellsUsable = !(local instanceof Cluster);
  const dirty = bellsUsable ? createDirtyShards(topology.peerIndexes) : pollingShards();
  // A reconnect of the federation's client may follow lost replies or a Redis that lost its data.
  local.on('ready', () => dirty.markAll());

  // Each peer's published rule terms (rule-identity.ts), read with its topology fingerprint; kept while a peer is
  // unreachable (its last terms still hold it). `deciding` is `current` at the tighter terms of peers that disagree.
  const peerTerms = new Map<string, Record<string, RuleTerms>>();
  let deciding = config;
  const tightenedListeners: (() => void)[] = [];
  const publisher = createPublisher({
    config,
    currentConfig: () => current,
    decidingConfig: () => deciding,
    topology,
    redis: local,
    links,
    metrics,
    peers,
    logger,
    addTimeoutMs,
    heartbeatMs: heartbeatIntervalMs(interval),
    dirty,
  });
  const fingerprints = createFingerprintWatch(topology.fingerprint, logger);
  const prefixes = createPrefixWatch(keys.prefix, logger);
  let fingerprintsCheckedAt = 0;
  // A rule mismatch first seen in gossip: the peer's terms are read at the next round, not in up to 5 s.
  const ruleWatch = createRuleWatch(logger, () => {
    fingerprintsCheckedAt = 0;
  });
  const regions = topology.regions.length;
  // What this region publishes: the terms of the rules as configured (never the tightened ones).
  let termsPublished: Config | undefined;
  const publishTerms = async () => {
    if (termsPublished === current) return;
    const publishing = current;
    await local.hset(keys.metaKey, RULE_TERMS_FIELD, JSON.stringify(ruleTermsOf(publishing, regions)));
    termsPublished = publishing;
  };
  const retighten = () => {
    const next = tightenRules(current, peerTerms.values(), regions);
    const signature = (c: Config) =>
      JSON.stringify([c.federation.maxClockSkewMs, c.rules.map((r) => [r.name, r.limit, r.burst, r.leakageBudget])]);
    if (signature(next) === signature(deciding)) {
      deciding = next;
      return;
    }
    deciding = next;
    applier = applierFor(deciding);
    const tightened = deciding.rules.filter((rule, i) => rule !== current.rules[i]).map((rule) => rule.name);
    const skew = deciding.federation.maxClockSkewMs;
    const skewRaised = skew !== current.federation.maxClockSkewMs;
    logger.warn(
      { event: 'federation.rules_tightened', rules: tightened, maxClockSkewMs: skew },
      tightened.length > 0 || skewRaised
        ? [
            tightened.length > 0 &&
              `deciding ${tightened.map((name) => `"${name}"`).join(', ')} at the tighter terms of a peer that runs it with other parameters`,
            skewRaised && `deciding with a peer's larger maxClockSkewMs ${skew} (ours ${current.federation.maxClockSkewMs})`,
          ]
            .filter(Boolean)
            .join('; ')
        : 'every peer runs our rule parameters again: deciding at our own terms',
    );
    for (const listener of tightenedListeners) listener();
  };
  const checkFingerprints = async () => {
    fingerprintsCheckedAt = Date.now();
    await publishTerms().catch(() => undefined);
    const ours = ruleFingerprints(current, regions);
    await Promise.all(
      links.map(async (link) => {
        const [theirs, terms] = await Promise.all([link.fingerprint(), link.ruleTerms().then(parseRuleTerms)]);
        fingerprints.observe(link.name, theirs);
        if (terms !== null) {
          peerTerms.set(link.name, terms);
          for (const [name, own] of ours) {
            const peer = terms[name];
            if (peer !== undefined) ruleWatch.observe(link.name, name, peer.fingerprint, own);
          }
        }
        // No meta under our prefix on the peer's Redis: it has not started yet, or it runs under another prefix.
        if (theirs !== null) prefixes.observe(link.name, null);
        else {
          const other = await link.foreignPrefix();
          if (other !== null) prefixes.observe(link.name, other);
        }
      }),
    );
    retighten();
  };
  const lock = createPublisherLock(local, keys, publisherLockTtlMs(interval));
  const standbyInterval = standbyRoundMs(interval);
  // The gossip worker's merges tell the publisher of new work in process while it runs here and waits on the bells
  // (the lock surely held): no bell rung, so no BLMPOP wake and drain_bells.lua round trip per applied job, and the
  // keys they granted in come with their state, so the fast lane sends them without its take. Marks made just as the
  // lock is lost only wait: a new holder looks at every shard when it takes over (lead), the keys stay in their
  // sets, and a handed key stays pending for its grantee (its next sync round).
  const inProcess: InProcessPublisher = {
    quiet: () => bells !== undefined && lock.surelyHeld(),
    queued(work, handed) {
      for (const { key, lanes } of work) markShardLanes(dirty, shardOfKey(key), maskLanes(lanes));
      if (handed.length > 0) publisher.handOver(handed);
      wakeFast();
    },
  };
  const applierFor = (rules: Config) =>
    createApplier({
      config: rules,
      configured: current,
      topology,
      redis: local,
      metrics,
      peers,
      logger,
      resync: (requester) => markAllPending(local, current, requester),
      fingerprints,
      ruleWatch,
      publisher: inProcess,
    });
  let applier = applierFor(config);
  const apply: typeof applier = (data, bytes) => applier(data, bytes);

  let recovery: RecoveryResult | undefined;
  let worker: GossipWorker | undefined;
  const recoveryDeps = {
    config,
    topology,
    redis: local,
    logger,
    declaredNew: options.newFederation === true || config.federation.bootstrap === 'new',
  };

  const recover = async () => {
    recovery = await recoverOnStart(recoveryDeps);
    if (recovery.fenced) publisher.requestResync();
    // Only now: applying gossip before the fence is decided would create markers that fence a fresh region.
    worker = startGossipWorker(config.redis, apply, logger, (reason, detail) => {
      metrics.rejected.inc({ region: config.region, peer: 'unknown', reason });
      logger.warn({ event: 'federation.gossip_rejected', reason, peer: 'unknown', detail }, `gossip job rejected: ${reason}`);
    });
  };

  // Whether this process held the publisher lock at its last round: only the holder waits on the bells and runs
  // the fast lane.
  let leader = false;
  let bells: BellWaiter | undefined;
  let fullPassAt = Date.now();
  let sampledAt = 0;
  const lead = (holding: boolean) => {
    if (holding === leader) return;
    leader = holding;
    if (holding) {
      // Taking over: whatever the previous holder had not sent is looked at now.
      dirty.markAll();
      if (bellsUsable && !stopped) bells = startBellWaiter(local as Redis, keys, dirty, wakeFast, logger, FAST_LANE_MS);
      wakeFast();
    } else {
      bells?.stop();
      bells = undefined;
    }
  };
  /** One round; `force` (flush): every peer gets its round, even one the fast lane flushed just now. */
  const round = async (force = false) => {
    try {
      if (recovery === undefined) await recover();
      else if (!(await stateIntact(local, keys))) {
        await recoverWhileRunning(recoveryDeps);
        publisher.requestResync();
        recheckRedis = false;
      } else if (recheckRedis) {
        const fence = await recheckAfterReconnect(recoveryDeps);
        recheckRedis = false;
        if (fence > 0) publisher.requestResync();
      }
      lead(await lock.hold());
      if (leader && Date.now() - fullPassAt >= FULL_PASS_MS) {
        fullPassAt = Date.now();
        if (bellsUsable) await markLanesWithWork(local as Redis, keys, dirty, topology.peerIndexes);
        wakeFast();
      }
      if (leader) await publisher.round(force);
      else if (Date.now() - sampledAt >= STANDBY_BACKLOG_MS) {
        sampledAt = Date.now();
        await publisher.sampleBacklog();
      }
      if (Date.now() - fingerprintsCheckedAt >= FINGERPRINT_CHECK_MS) await checkFingerprints();
    } catch (error) {
      dirty.markAll();
      logger.warn({ event: 'federation.round_failed', error: (error as Error).message }, 'federation round failed; retrying next interval');
    }
  };

  // Rounds never overlap: the timer chain and flush() both go through this one promise chain.
  let chain: Promise<void> = Promise.resolve();
  const exclusive = (force = false): Promise<void> => {
    const next = chain.then(() => round(force));
    chain = next.catch(() => undefined);
    return next;
  };

  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    void exclusive().finally(() => {
      if (!stopped) timer = setTimeout(tick, leader ? interval : standbyInterval);
    });
  };

  // The fast lane: keys queued by decide.lua (first admission in a window/epoch) and apply_gossip.lua (grants)
  // go out when the bells wake the publisher instead of waiting for the next round, at most once per
  // FAST_LANE_MS and, while many keys keep it busy, as often as its pace allows (fast-pace.ts); it runs again
  // while a shard is left dirty for it (on a cluster: always, every FAST_LANE_MS). Never overlaps itself.
  let fastTimer: NodeJS.Timeout | undefined;
  let fastRunning = false;
  let fastWanted = false;
  let fastStartedAt = 0;
  const fastPace = createFastPace();
  function wakeFast(): void {
    fastWanted = true;
    if (stopped || fastRunning || fastTimer !== undefined) return;
    const now = Date.now();
    fastTimer = setTimeout(runFast, Math.max(0, fastStartedAt + FAST_LANE_MS - now, fastPace.wait(now)));
  }
  function runFast(): void {
    fastTimer = undefined;
    if (stopped || !fastWanted) return;
    fastWanted = false;
    fastRunning = true;
    fastStartedAt = Date.now();
    const run = leader && worker !== undefined ? publisher.fastRound() : Promise.resolve(0);
    void run
      .then((sent) => {
        if (sent > 0) fastPace.spend(Date.now());
      })
      .finally(() => {
        fastRunning = false;
        // Not the holder: the fast lane waits until this process takes the lock (lead() wakes it).
        if (leader && (fastWanted || dirty.pending('fast'))) wakeFast();
      });
  }

  await exclusive();
  if (recovery === undefined)
    logger.warn({ event: 'federation.recovery_deferred' }, 'Redis not reachable: recovery check deferred to the next rounds');
  timer = setTimeout(tick, interval);
  wakeFast();

  return {
    topology,
    get recovery() {
      return recovery;
    },
    // Everything pending goes out, whether or not its bell was heard yet.
    flush: () => {
      dirty.markAll();
      return exclusive(true);
    },
    updateRules(next) {
      current = next;
      deciding = next;
      applier = applierFor(next);
      // Our new terms go out, and the peers' are compared with them, at the next round.
      fingerprintsCheckedAt = 0;
      retighten();
    },
    tighten: (rules) => (rules === current ? deciding : tightenRules(rules, peerTerms.values(), regions)),
    onTightened(listener) {
      tightenedListeners.push(listener);
    },
    async close() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      clearTimeout(fastTimer);
      bells?.stop();
      bells = undefined;
      dirty.markAll();
      await orAfter(exclusive(), Math.max(2_000, 2 * addTimeoutMs), undefined);
      await orAfter(
        lock.release().catch(() => undefined),
        1_000,
        undefined,
      );
      if (worker) {
        // close() waits for the active job; with this region's Redis gone it may never finish, so force, bounded.
        const closing = worker.close().then(
          () => true,
          () => true,
        );
        if ((await orAfter(closing, 2_000, undefined)) === undefined)
          await orAfter(
            worker.close(true).catch(() => undefined),
            2_000,
            undefined,
          );
      }
      await Promise.all(links.map((link) => orAfter(link.close(), 2_000, undefined)));
      if (
        (await orAfter(
          local.quit().then(
            () => true,
            () => false,
          ),
          1_000,
          undefined,
        )) !== true
      )
        local.disconnect();
    },
    status: () => peers.list(),
    problems: () => fingerprints.problems(),
    warnings: () => [...ruleWatch.problems(), ...prefixes.warnings()],
  };
}

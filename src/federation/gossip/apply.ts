// Applies one gossip job to this region's Redis: verify it (message.ts), refuse replays (replay.ts), merge every
// entry with apply_gossip.lua (which also moves unused allowance to hungry regions), then record the job and
// when the sender was last heard: after the check in JavaScript, one call to Redis (apply_job.lua,
// gossip-calls.ts runApplyJob). A rejected job never reaches a counter.
import type { Logger } from 'pino';
import { FEDERATED_ALGORITHMS, type Config, type Rule } from '../../config/schema.ts';
import { applyGossipCall, runApplyJob, type FastKey, type JobRecord } from '../../store/gossip-calls.ts';
import type { ScriptedRedis } from '../../store/commands.ts';
import type { ScriptCall } from '../../store/script-call.ts';
import { layoutOf, ruleNameOf } from '../../keys.ts';
import type { FingerprintWatch } from '../fingerprints.ts';
import { ruleFingerprints } from '../rule-identity.ts';
import type { RuleWatch } from '../rule-watch.ts';
import type { FederationMetrics } from '../metrics.ts';
import type { PeerBook } from '../peers.ts';
import type { Topology } from '../../protocol/index.ts';
import { verify, type GossipEntry, type RejectReason } from './message.ts';
import { alreadyApplied, RETAINED } from './replay.ts';

/** Meta field the receiver sets to the time it last heard from a region (read by that region's recovery). */
export function heardField(region: string): string {
  return `heard:${region}`;
}

export type ApplyOutcome =
  | { status: 'applied'; kind: 'gossip' | 'heartbeat' | 'resync'; entries: number; changed: number; skipped: number }
  | { status: 'rejected'; reason: RejectReason; detail: string };

export interface ApplierDeps {
  config: Config;
  topology: Topology;
  /** This region's Redis (a federation-owned client with a generous command timeout). */
  redis: ScriptedRedis;
  metrics: FederationMetrics;
  peers: PeerBook;
  logger: Logger;
  /** Marks every live state key pending for the requester (resync.ts). */
  resync(requesterIndex: number): Promise<number>;
  /** Told about a sender's fingerprint when its gossip is rejected for it (logged there once per peer). */
  fingerprints?: FingerprintWatch;
  /** Told about every rule fingerprint a sender sent (rule-watch.ts: a disagreement is logged once and on /readyz). */
  ruleWatch?: RuleWatch;
  /**
   * The region's publisher, when it may run in this process (index.ts). While `quiet()` says it does, a job's merges
   * leave the shards' bells as they are and `queued` is told, once per job, each key whose merge gave the publisher
   * work, with its lanes (a bell's mask: gossip-calls.ts ApplyGossipReply.lanes): the publisher wakes without the
   * bell's round trips (its BLMPOP's wake, drain_bells.lua). Without it, or while not quiet, the merges ring.
   */
  publisher?: InProcessPublisher;
  /**
   * The rules in force as configured, whose fingerprints entries are compared with; `config` when omitted.
   * `config` itself may hold them at a disagreeing peer's tighter terms (rule-identity.ts `tightenRules`).
   */
  configured?: Config;
}

export type Applier = (data: unknown, bytes: number) => Promise<ApplyOutcome>;

/** The region's publisher as an applier in the same process tells it of new work (ApplierDeps.publisher). */
export interface InProcessPublisher {
  /** Whether merges may leave the bells silent now: this process surely runs the region's publisher. */
  quiet(): boolean;
  /**
   * The keys a quiet job's merges gave work, each with its lanes (a bell's mask, -1 every lane), and the keys they
   * granted in, taken off the fast-lane sets with their state for the fast lane to send (apply_job.lua hand_over).
   */
  queued(work: readonly QueuedWork[], handed: readonly FastKey[]): void;
}

/** A key a merge gave the publisher work for, and in which lanes (a bell's mask: lua/includes/bell.lua). */
export interface QueuedWork {
  key: string;
  lanes: number;
}

export function createApplier(deps: ApplierDeps): Applier {
  const { config, topology, redis, metrics, peers, logger } = deps;
  const region = config.region;
  const keys = layoutOf(config);
  // Only federated rules: an entry of any other rule is skipped.
  const rules = new Map<string, Rule>(
    config.rules.filter((rule) => FEDERATED_ALGORITHMS.has(rule.algorithm)).map((rule) => [rule.name, rule]),
  );

  const ours = ruleFingerprints(deps.configured ?? config, topology.regions.length);
  /**
   * An entry's apply_gossip call, or why it is skipped: a rule this region does not federate, or one the sender
   * runs with other parameters (its fingerprint differs from ours: its counts were made under another limit,
   * period or algorithm). A sender that sent no fingerprint is trusted.
   */
  const entryCall = (
    entry: GossipEntry,
    senderIndex: number,
    theirs: Record<string, string> | undefined,
  ): ScriptCall | 'unknown_rule' | 'rule_mismatch' => {
    const name = ruleNameOf(entry.k);
    const rule = rules.get(name);
    if (!rule) return 'unknown_rule';
    const fingerprint = theirs?.[name];
    if (fingerprint !== undefined && fingerprint !== ours.get(name)) return 'rule_mismatch';
    return applyGossipCall(keys, topology, rule, config.federation.leakageBudget, senderIndex, entry);
  };

  // A peer on another message version (a rolling upgrade) sends every job in it: said once per peer and version.
  const versionsSaid = new Set<string>();

  const reject = (reason: RejectReason, from: string | undefined, detail: string): ApplyOutcome => {
    metrics.rejected.inc({ region, peer: from ?? 'unknown', reason });
    peers.rejected(from);
    if (reason === 'version' && versionsSaid.has(`${from}:${detail}`)) {
      logger.debug({ event: 'federation.gossip_rejected', reason, peer: from ?? 'unknown', detail }, `gossip job rejected: ${reason}`);
    } else if (reason === 'version') {
      versionsSaid.add(`${from}:${detail}`);
      logger.warn(
        { event: 'federation.gossip_rejected', reason, peer: from ?? 'unknown', detail },
        `gossip job rejected: ${detail}; regions on different versions do not merge each other's gossip until all run one`,
      );
    } else if (reason === 'fingerprint' && from !== undefined && deps.fingerprints) {
      // A topology mismatch rejects every job of that peer: said once per peer (fingerprints.ts), counted per job.
      deps.fingerprints.observe(from, detail);
      logger.debug({ event: 'federation.gossip_rejected', reason, peer: from, detail }, `gossip job rejected: ${reason}`);
    } else {
      logger.warn({ event: 'federation.gossip_rejected', reason, peer: from ?? 'unknown', detail }, `gossip job rejected: ${reason}`);
    }
    return { status: 'rejected', reason, detail };
  };

  return async (data, bytes) => {
    const verdict = verify(data, bytes, topology, region, config.federation.secret, keys);
    if (!verdict.ok) return reject(verdict.reason, verdict.from, verdict.detail);
    const { message, senderIndex } = verdict;
    const now = Date.now();
    const record: JobRecord = {
      replayKey: keys.replayKey(message.from),
      seq: message.seq,
      retained: RETAINED,
      metaKey: keys.metaKey,
      heardField: heardField(message.from),
      heardAt: now,
    };
    const replayed = () => reject('replayed', message.from, `seq ${message.seq}`);

    let changed = 0;
    let skipped = 0;
    if (message.kind === 'resync') {
      // The resync marks every key pending for the sender: only once per job, and recorded once it is done.
      if (await alreadyApplied(redis, keys, message.from, message.seq)) return replayed();
      const marked = await deps.resync(senderIndex);
      logger.info(
        { event: 'federation.resync_served', peer: message.from, keys: marked },
        `resync for ${message.from}: ${marked} keys marked pending`,
      );
      if ((await runApplyJob(redis, record, [])).replayed) return replayed();
    } else {
      for (const [name, fingerprint] of Object.entries(message.rules ?? {})) {
        const own = ours.get(name);
        if (own !== undefined) deps.ruleWatch?.observe(message.from, name, fingerprint, own);
      }
      // Every entry's merge, the replay check before them and the record and heard mark after them: one call.
      const calls: ScriptCall[] = [];
      const callKeys: string[] = [];
      let mismatched = 0;
      for (const entry of message.entries) {
        const call = entryCall(entry, senderIndex, message.rules);
        if (call === 'unknown_rule') skipped++;
        else if (call === 'rule_mismatch') mismatched++;
        else {
          calls.push(call);
          callKeys.push(entry.k);
        }
      }
      const publisher = deps.publisher?.quiet() === true ? deps.publisher : undefined;
      const job = await runApplyJob(redis, record, calls, publisher !== undefined);
      if (job.replayed) return replayed();
      if (publisher !== undefined) {
        const work = job.replies.flatMap((result, i) => (result.lanes === 0 ? [] : [{ key: callKeys[i]!, lanes: result.lanes }]));
        const handed = job.replies.flatMap((result, i) =>
          result.handed === undefined ? [] : [{ key: callKeys[i]!, fields: result.handed }],
        );
        if (work.length > 0 || handed.length > 0) publisher.queued(work, handed);
      }
      for (const result of job.replies) {
        if (result.changed) {
          changed++;
          metrics.syncLag.observe({ region, peer: message.from }, Math.max(0, result.lagMs) / 1000);
        }
        if (result.granted) metrics.grants.inc({ region, peer: message.from });
      }
      if (skipped > 0) metrics.skipped.inc({ region, peer: message.from, reason: 'unknown_rule' }, skipped);
      if (mismatched > 0) metrics.skipped.inc({ region, peer: message.from, reason: 'rule_mismatch' }, mismatched);
      skipped += mismatched;
    }

    peers.heard(message.from, now);
    metrics.batches.inc({ region, peer: message.from, direction: 'received' });
    metrics.bytes.inc({ region, peer: message.from, direction: 'received' }, bytes);
    return { status: 'applied', kind: message.kind, entries: message.entries.length, changed, skipped };
  };
}

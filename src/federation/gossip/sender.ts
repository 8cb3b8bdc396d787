// What the sync round and the fast lane share to send gossip: signed jobs (message.ts) numbered from one sequence,
// split to the receiver's byte bound, added to a peer's queue under a timeout, and counted per peer.
import { withDeadline } from '../../deadline.ts';
import type { Config } from '../../config/schema.ts';
import type { FederationMetrics } from '../metrics.ts';
import type { PeerBook } from '../peers.ts';
import type { Topology } from '../../protocol/index.ts';
import { encodeJob, LIMITS, MESSAGE_VERSION, type GossipEntry, type GossipJob, type GossipMessage, type MessageKind } from './message.ts';
import type { PeerLink } from './peer-link.ts';
import { ruleNameOf } from '../../keys.ts';
import { ruleFingerprints } from '../rule-identity.ts';

/** A message, its job data and the JSON size of that data (what BullMQ stores: the size check and the bytes metric). */
export interface Outgoing {
  message: GossipMessage;
  job: GossipJob;
  bytes: number;
}

/**
 * The job of `message`, encoded for `n` regions, signed with `secret` when given, and measured.
 *
 * @example
 * const outgoing = measured(message, topology.regions.length, config.federation.secret);
 * outgoing.bytes; // JSON.stringify(outgoing.job).length
 */
export function measured(message: GossipMessage, n: number, secret: string | undefined): Outgoing {
  const job = encodeJob(message, n, secret);
  return { message, job, bytes: JSON.stringify(job).length };
}

/** Splits a batch until each job's JSON fits the receiver's byte bound. */
export function fitToSize(entries: GossipEntry[], build: (chunk: GossipEntry[]) => Outgoing): Outgoing[] {
  const job = build(entries);
  if (entries.length <= 1 || job.bytes <= LIMITS.maxBytes * 0.9) return [job];
  const half = Math.ceil(entries.length / 2);
  return [...fitToSize(entries.slice(0, half), build), ...fitToSize(entries.slice(half), build)];
}

export interface SenderDeps {
  config: Config;
  topology: Topology;
  metrics: FederationMetrics;
  peers: PeerBook;
  /** Upper bound on one add to a peer (a frozen peer must not stall the loop). */
  addTimeoutMs: number;
  /** The rules in force (a policy reload changes them): their fingerprints travel with the entries. */
  currentConfig?: () => Config;
}

export interface Sender {
  /** The signed job of `kind` to the link's region, numbered after every message sent before, measured. */
  build(link: PeerLink, kind: MessageKind, entries: GossipEntry[]): Outgoing;
  /** Adds the jobs in order; false (and the link marked down) at the first failure. */
  send(link: PeerLink, jobs: Outgoing[]): Promise<boolean>;
  /** Epoch ms of the last job added to the peer's queue; 0 before the first. */
  lastSentAt(peer: string): number;
}

export function createSender({ config, topology, metrics, peers, addTimeoutMs, currentConfig }: SenderDeps): Sender {
  const region = config.region;
  // Rule fingerprints of the rules in force, computed again when the config object changes (a reload).
  let fingerprintsOf: Config | undefined;
  let fingerprints = new Map<string, string>();
  const ruleFingerprintsNow = (): Map<string, string> => {
    const now = currentConfig?.() ?? config;
    if (now !== fingerprintsOf) {
      fingerprintsOf = now;
      fingerprints = ruleFingerprints(now, topology.regions.length);
    }
    return fingerprints;
  };
  /** The fingerprints of the rules of `entries` (state keys name their rule: qf:{s<n>}:<rule>:<hash>). */
  const rulesOf = (entries: readonly GossipEntry[]): Record<string, string> | undefined => {
    if (entries.length === 0) return undefined;
    const all = ruleFingerprintsNow();
    const rules: Record<string, string> = {};
    for (const entry of entries) {
      const name = ruleNameOf(entry.k);
      const fingerprint = all.get(name);
      if (fingerprint !== undefined) rules[name] = fingerprint;
    }
    return rules;
  };
  const lastSent = new Map<string, number>();
  let lastSeq = 0;

  // µs-clock based, so a restarted (or wiped) sender continues above every number it sent before.
  const nextSeq = () => {
    lastSeq = Math.max(lastSeq + 1, Date.now() * 1000);
    return lastSeq;
  };

  return {
    build: (link, kind, entries) =>
      measured(
        {
          v: MESSAGE_VERSION,
          kind,
          from: region,
          to: link.name,
          fp: topology.fingerprint,
          seq: nextSeq(),
          sentAt: Date.now(),
          entries,
          rules: rulesOf(entries),
        },
        topology.regions.length,
        config.federation.secret,
      ),
    async send(link, jobs) {
      for (const { message, job, bytes } of jobs) {
        try {
          await withDeadline(link.add(message.kind, job), addTimeoutMs, `gossip add to ${link.name}`);
        } catch (error) {
          peers.failed(link.name, error);
          return false;
        }
        const now = Date.now();
        lastSent.set(link.name, now);
        peers.sent(link.name, now);
        metrics.batches.inc({ region, peer: link.name, direction: 'sent' });
        metrics.bytes.inc({ region, peer: link.name, direction: 'sent' }, bytes);
      }
      return true;
    },
    lastSentAt: (peer) => lastSent.get(peer) ?? 0,
  };
}

// Federation metrics, per peer. Created once per registry. Every series names the local region explicitly: it is
// the registry's default label too (src/metrics.ts), but several regions may share one process in tests, and an
// explicit label wins over the default. Label values are bounded: peers come from the config, and a
// job from an unknown sender is counted under peer="unknown", never under the name it claims.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface FederationMetrics {
  lastHeard: Gauge<'region' | 'peer'>;
  linkUp: Gauge<'region' | 'peer'>;
  syncLag: Histogram<'region' | 'peer'>;
  backlog: Gauge<'region' | 'peer'>;
  batches: Counter<'region' | 'peer' | 'direction'>;
  bytes: Counter<'region' | 'peer' | 'direction'>;
  sendFailures: Counter<'region' | 'peer'>;
  rejected: Counter<'region' | 'peer' | 'reason'>;
  skipped: Counter<'region' | 'peer' | 'reason'>;
  /** Keys sent on the fast lane (first admission in a window/epoch, grants), per peer. */
  fastLane: Counter<'region' | 'peer'>;
  /** Merges in which this region granted allowance (share) to a peer that needed it. */
  grants: Counter<'region' | 'peer'>;
  /** Window allowance this region left unused at window end while a peer was hungry, per rule. */
  stranded: Counter<'region' | 'rule'>;
}

/** Sync lag spans loopback (ms) to a WAN partition heal (seconds). */
const SYNC_LAG_BUCKETS = [0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30, 120];

const byRegistry = new WeakMap<Registry, FederationMetrics>();

export function federationMetrics(registry: Registry): FederationMetrics {
  const existing = byRegistry.get(registry);
  if (existing) return existing;
  const registers = [registry];
  const perPeer = ['region', 'peer'] as const;
  const perDirection = ['region', 'peer', 'direction'] as const;
  const perReason = ['region', 'peer', 'reason'] as const;
  const metrics: FederationMetrics = {
    lastHeard: new Gauge({
      name: 'quotafed_federation_peer_last_heard_timestamp_seconds',
      help: 'Unix time (s) of the last valid gossip job (batch, heartbeat or resync) applied from the peer.',
      labelNames: perPeer,
      registers,
    }),
    linkUp: new Gauge({
      name: 'quotafed_federation_link_up',
      help: "1 while this region's last gossip add to the peer's Redis succeeded, 0 after a failure.",
      labelNames: perPeer,
      registers,
    }),
    syncLag: new Histogram({
      name: 'quotafed_federation_sync_lag_seconds',
      help: "Time from a change in the peer's Redis (an admission or transfer) until it is visible in this region.",
      labelNames: perPeer,
      buckets: SYNC_LAG_BUCKETS,
      registers,
    }),
    backlog: new Gauge({
      name: 'quotafed_federation_backlog_keys',
      help: 'Keys changed here and not yet delivered to the peer (sum of ZCARD of its pending sets: as the publishing gateway drains them, every minute in the others).',
      labelNames: perPeer,
      registers,
    }),
    batches: new Counter({
      name: 'quotafed_federation_batches_total',
      help: 'Gossip jobs sent to (direction=sent) or applied from (direction=received) the peer, heartbeats included.',
      labelNames: perDirection,
      registers,
    }),
    bytes: new Counter({
      name: 'quotafed_federation_bytes_total',
      help: 'JSON bytes of gossip jobs sent to or applied from the peer.',
      labelNames: perDirection,
      registers,
    }),
    sendFailures: new Counter({
      name: 'quotafed_federation_send_failures_total',
      help: "Gossip adds to the peer's Redis that failed (peer down, partition); the keys stay pending.",
      labelNames: perPeer,
      registers,
    }),
    rejected: new Counter({
      name: 'quotafed_federation_rejected_jobs_total',
      help:
        'Gossip jobs rejected without touching any counter, by reason ' +
        '(oversized|invalid|version|bad_mac|unknown_region|wrong_destination|fingerprint|out_of_range|replayed).',
      labelNames: perReason,
      registers,
    }),
    skipped: new Counter({
      name: 'quotafed_federation_skipped_entries_total',
      help: "Entries of valid gossip jobs not applied, by reason (unknown_rule: the rule is not in this region's config or not federated).",
      labelNames: perReason,
      registers,
    }),
    fastLane: new Counter({
      name: 'quotafed_federation_fast_lane_keys_total',
      help: 'Keys sent to a peer on the fast lane (a first admission in a window/epoch, or a grant), ahead of the sync round.',
      labelNames: perPeer,
      registers,
    }),
    grants: new Counter({
      name: 'quotafed_federation_grants_total',
      help:
        'Gossip merges after which this region gave allowance (share and tokens) to peers that needed it, by the ' +
        'peer whose gossip triggered it.',
      labelNames: perPeer,
      registers,
    }),
    stranded: new Counter({
      name: 'quotafed_federation_stranded_allowance_total',
      help:
        'Window allowance (requests) this region still held unused when a window ended while its view showed a ' +
        'hungry peer: what the federation could have admitted there and did not (window rules; docs/federation.md §4).',
      labelNames: ['region', 'rule'] as const,
      registers,
    }),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}

// What this region knows about each peer link, for GET /admin/federation/peers, the metrics and the link
// up/down log lines (logged on transitions only, never per batch).
import type { Logger } from 'pino';
import { connectionOptionsFromUrl } from '../store/client.ts';
import type { FederationMetrics } from './metrics.ts';

/** The least time between two heartbeats to an idle peer (a heartbeat says "alive", not "nothing changed"). */
export const IDLE_HEARTBEAT_MS = 5_000;

/** How long a link may stay silent before a heartbeat goes to the peer: the idle heartbeat interval, or the sync interval if longer. */
export function heartbeatIntervalMs(syncIntervalMs: number): number {
  return Math.max(syncIntervalMs, IDLE_HEARTBEAT_MS);
}

/**
 * How long nothing may be heard from a healthy peer (batches or heartbeats) before it reads as silent: three
 * heartbeat intervals, and at least five sync intervals.
 */
export function peerSilentAfterMs(syncIntervalMs: number): number {
  return Math.max(3 * heartbeatIntervalMs(syncIntervalMs), 5 * syncIntervalMs);
}

export interface PeerStatus {
  name: string;
  index: number;
  /** host:port of the peer's Redis (credentials never shown). */
  redis: string;
  /** Outbound link: true after a successful add, false after a failed one, null before the first attempt. */
  linkUp: boolean | null;
  lastSentAt: number | null;
  /** Last valid job applied from the peer (ms). */
  lastHeardAt: number | null;
  lastError: string | null;
  /** Keys pending delivery to the peer (last sample). */
  backlog: number;
  batchesSent: number;
  batchesReceived: number;
  sendFailures: number;
  rejected: number;
  /** A resync request to this peer is waiting to be sent (after this region lost data). */
  resyncPending: boolean;
}

export interface PeerBook {
  list(): PeerStatus[];
  get(name: string): PeerStatus | undefined;
  sent(name: string, at: number): void;
  failed(name: string, error: unknown): void;
  heard(name: string, at: number): void;
  rejected(name: string | undefined): void;
  backlog(name: string, keys: number): void;
}

function hostOf(url: string): string {
  try {
    const { host, port } = connectionOptionsFromUrl(url);
    return `${host}:${port}`;
  } catch {
    return '(invalid url)';
  }
}

export function createPeerBook(
  region: string,
  peers: readonly { name: string; index: number; redisUrl: string }[],
  metrics: FederationMetrics,
  logger: Logger,
): PeerBook {
  const statuses = new Map<string, PeerStatus>(
    peers.map((peer) => [
      peer.name,
      {
        name: peer.name,
        index: peer.index,
        redis: hostOf(peer.redisUrl),
        linkUp: null,
        lastSentAt: null,
        lastHeardAt: null,
        lastError: null,
        backlog: 0,
        batchesSent: 0,
        batchesReceived: 0,
        sendFailures: 0,
        rejected: 0,
        resyncPending: false,
      },
    ]),
  );
  const labels = (peer: string) => ({ region, peer });
  return {
    list: () => [...statuses.values()].map((status) => ({ ...status })),
    get: (name) => statuses.get(name),
    sent(name, at) {
      const status = statuses.get(name);
      if (!status) return;
      if (status.linkUp !== true)
        logger.info({ event: 'federation.link_up', peer: name, after: status.lastError }, `gossip link to ${name} is up`);
      status.linkUp = true;
      status.lastSentAt = at;
      status.lastError = null;
      status.batchesSent++;
      metrics.linkUp.set(labels(name), 1);
    },
    failed(name, error) {
      const status = statuses.get(name);
      if (!status) return;
      const message = error instanceof Error ? error.message : String(error);
      if (status.linkUp !== false)
        logger.warn({ event: 'federation.link_down', peer: name, error: message }, `gossip link to ${name} is down; changes stay pending`);
      status.linkUp = false;
      status.lastError = message;
      status.sendFailures++;
      metrics.linkUp.set(labels(name), 0);
      metrics.sendFailures.inc(labels(name));
    },
    heard(name, at) {
      const status = statuses.get(name);
      if (!status) return;
      if (status.lastHeardAt === null) logger.info({ event: 'federation.peer_heard', peer: name }, `first gossip from ${name}`);
      status.lastHeardAt = at;
      status.batchesReceived++;
      metrics.lastHeard.set(labels(name), at / 1000);
    },
    rejected(name) {
      const status = name === undefined ? undefined : statuses.get(name);
      if (status) status.rejected++;
    },
    backlog(name, keys) {
      const status = statuses.get(name);
      if (!status) return;
      status.backlog = keys;
      metrics.backlog.set(labels(name), keys);
    },
  };
}

// Link health as the dashboard sees it: the federation's per-peer status (last gossip add, last heard, backlog)
// and a PING to each peer's Redis, the place this region's gossip goes. The PING notices a dead peer within a
// second even when no gossip was due. Without a federation the pending sets in the region's own Redis give
// the backlog.
import { Redis } from 'ioredis';
import type { Config } from '../config/schema.ts';
import type { RegionRedis } from '../store/client.ts';
import { peerSilentAfterMs, type PeerStatus } from '../federation/peers.ts';
import type { Topology } from '../protocol/index.ts';
import { KEY_SHARDS, type KeyLayout, layoutOf } from '../keys.ts';
import type { LinkView } from './types.ts';

/** The part of the federation's per-peer status (src/federation/peers.ts) the dashboard reads. */
export type PeerStatusLike = Pick<PeerStatus, 'name'> & Partial<Pick<PeerStatus, 'linkUp' | 'lastHeardAt' | 'lastError' | 'backlog'>>;

export interface FederationStatusLike {
  status(): readonly PeerStatusLike[];
}

export interface LinkProbe {
  /** `syncLagMs`: the federation's measured lag from each peer into this region, by peer name. */
  links(syncLagMs?: ReadonlyMap<string, number>): Promise<LinkView[]>;
  close(): Promise<void>;
}

export interface LinkProbeOptions {
  config: Config;
  topology: Topology;
  /** The region's own Redis, for backlog depth; omitted → backlog unknown unless the federation reports it. */
  redis?: RegionRedis | undefined;
  federation?: FederationStatusLike | undefined;
  /** PING peers' Redis servers directly (default true). */
  probePeers?: boolean;
  /** A peer silent longer than this is shown down (default: federation/peers.ts peerSilentAfterMs). */
  staleAfterMs?: number;
  now?: () => number;
}

const PING_TIMEOUT_MS = 750;

function peerClient(url: string): Redis {
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: PING_TIMEOUT_MS,
    commandTimeout: PING_TIMEOUT_MS,
    // Keep trying, but never hammer a dead peer: at most one reconnect per second.
    retryStrategy: (times) => Math.min(times * 250, 1_000),
  });
  // Failures are reported by ping(); an unhandled 'error' event would only spam stderr.
  client.on('error', () => undefined);
  return client;
}

function describe(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  if (/ECONNREFUSED/.test(text)) return 'connection refused';
  if (/timed? ?out/i.test(text)) return 'timeout';
  if (/writable|not connected|closed|offline/i.test(text)) return 'not connected';
  return text.slice(0, 60);
}

async function backlogTo(redis: RegionRedis, keys: KeyLayout, peerIndex: number): Promise<number> {
  const counts = await Promise.all(Array.from({ length: KEY_SHARDS }, (_, shard) => redis.zcard(keys.peerPendingKey(shard, peerIndex))));
  return counts.reduce((total, count) => total + count, 0);
}

export function createLinkProbe(options: LinkProbeOptions): LinkProbe {
  const { config, topology } = options;
  const now = options.now ?? Date.now;
  const staleAfterMs = options.staleAfterMs ?? peerSilentAfterMs(config.federation.syncIntervalMs);
  const peers = config.federation.peers;
  const clients = new Map<string, Redis>();
  const lastReached = new Map<string, number>();
  if (options.probePeers ?? true) for (const peer of peers) clients.set(peer.name, peerClient(peer.redisUrl));

  const ping = async (name: string): Promise<{ ok: boolean; detail?: string }> => {
    const client = clients.get(name);
    if (!client) return { ok: false, detail: 'not probed' };
    try {
      if (client.status === 'wait') await client.connect();
      await client.ping();
      lastReached.set(name, now());
      return { ok: true };
    } catch (error) {
      return { ok: false, detail: describe(error) };
    }
  };

  return {
    async links(syncLagMs) {
      const reported = options.federation ? options.federation.status() : [];
      const byPeer = new Map(reported.map((status) => [status.name, status]));
      return Promise.all(
        peers.map(async (peer): Promise<LinkView> => {
          const peerIndex = topology.regions.indexOf(peer.name);
          const [probe, sampledBacklog] = await Promise.all([
            clients.has(peer.name) ? ping(peer.name) : Promise.resolve(undefined),
            options.redis && !options.federation
              ? backlogTo(options.redis, layoutOf(config), peerIndex).catch(() => null)
              : Promise.resolve(null),
          ]);
          const status = byPeer.get(peer.name);
          const heardAgo = status?.lastHeardAt == null ? undefined : now() - status.lastHeardAt;
          const reachedAt = lastReached.get(peer.name);
          const ages = [heardAgo, reachedAt === undefined ? undefined : now() - reachedAt].filter(
            (age): age is number => age !== undefined,
          );

          // Down when any sign says so: the peer's Redis does not answer, the last gossip add failed, or the
          // peer has been silent (heartbeats included) for longer than staleAfterMs.
          const reasons: string[] = [];
          if (probe && !probe.ok) reasons.push(`${peer.name} Redis: ${probe.detail}`);
          if (status?.linkUp === false) reasons.push(`gossip add failed${status.lastError ? `: ${status.lastError.slice(0, 60)}` : ''}`);
          if (heardAgo !== undefined && heardAgo > staleAfterMs) reasons.push(`nothing heard for ${Math.round(heardAgo / 1000)} s`);
          const known = probe !== undefined || (status !== undefined && (status.linkUp != null || status.lastHeardAt != null));
          return {
            from: config.region,
            to: peer.name,
            state: reasons.length > 0 ? 'down' : known ? 'up' : 'unknown',
            syncLagMs: syncLagMs?.get(peer.name) ?? null,
            backlog: status?.backlog ?? sampledBacklog,
            lastHeardAgoMs: ages.length > 0 ? Math.min(...ages) : null,
            detail: reasons.length > 0 ? reasons.join('; ') : undefined,
          };
        }),
      );
    },
    async close() {
      await Promise.all([...clients.values()].map((client) => client.quit().catch(() => client.disconnect())));
      clients.clear();
    },
  };
}

// The peer side by side: one Upstash MultiRegionRatelimit per region, as an application in that region would
// run it. Its Redis list is the region's own Redis (direct) and each peer's Redis through the same Toxiproxy
// link quotafed's gossip uses, so both limiters suffer the same faults.
import { MultiRegionRatelimit } from '@upstash/ratelimit';
import { Redis } from 'ioredis';
import type { RegionName } from '../types.ts';
import { upstashAdapter } from './upstash-adapter.ts';

export interface PeerRegionLinks {
  region: RegionName;
  /** The region's own Redis. */
  ownRedisUrl: string;
  /** Each peer's Redis as this region reaches it (through its proxy). */
  peerRedisUrls: string[];
}

export interface PeerDecision {
  allowed: boolean;
  /** Upstash's window id (its client clock, like the library). */
  window: number;
}

export interface UpstashPeer {
  limit(region: RegionName, key: string): Promise<PeerDecision>;
  /** Background syncs still running (Upstash copies each request id to the other regions after answering). */
  pending(): number;
  close(): Promise<void>;
}

function client(url: string): Redis {
  const parsed = new URL(url);
  return new Redis({
    host: parsed.hostname,
    port: Number(parsed.port),
    // Fail fast while a link is down, like a serverless function that cannot reach a region.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 3_000,
    connectTimeout: 1_000,
    retryStrategy: () => 200,
    lazyConnect: false,
  });
}

/** Connections come up before the first request (an unreachable one is left to reconnect on its own). */
async function connected(clients: readonly Redis[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (clients.some((c) => c.status !== 'ready') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
}

export async function startUpstashPeer(links: readonly PeerRegionLinks[], limit: number, periodMs: number): Promise<UpstashPeer> {
  const clients: Redis[] = [];
  const limiters = new Map<RegionName, MultiRegionRatelimit>();
  let inFlightSyncs = 0;
  for (const link of links) {
    const redis = [link.ownRedisUrl, ...link.peerRedisUrls].map((url) => {
      const connection = client(url);
      connection.on('error', () => undefined);
      clients.push(connection);
      return upstashAdapter(connection);
    });
    limiters.set(
      link.region,
      new MultiRegionRatelimit({
        redis: redis as never,
        limiter: MultiRegionRatelimit.fixedWindow(limit, `${periodMs} ms`),
        prefix: 'upstash-chaos',
        analytics: false,
        enableTelemetry: false,
      } as ConstructorParameters<typeof MultiRegionRatelimit>[0]),
    );
  }
  await connected(clients, 5_000);
  return {
    async limit(region, key) {
      const limiter = limiters.get(region);
      if (!limiter) throw new Error(`no Upstash limiter for ${region}`);
      const window = Math.floor(Date.now() / periodMs);
      const response = await limiter.limit(key);
      inFlightSyncs += 1;
      response.pending.catch(() => undefined).finally(() => (inFlightSyncs -= 1));
      return { allowed: response.success, window };
    },
    pending: () => inFlightSyncs,
    async close() {
      await Promise.all(clients.map((connection) => connection.quit().catch(() => connection.disconnect())));
    },
  };
}

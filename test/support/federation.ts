// Several federated regions in one process for integration tests and measurements: a real redis-server per
// region, the real decision engine, and the real federation (BullMQ worker and publisher). Gossip links can go
// through cuttable proxies (link-proxy.ts) to stage partitions.
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { parseConfig } from '../../src/config/load.ts';
import type { Config, ConfigInput } from '../../src/config/schema.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import type { DecisionEngine } from '../../src/engine/types.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { startFederation, type Federation } from '../../src/federation/index.ts';
import { startLinkProxy, type LinkProxy } from './link-proxy.ts';

export interface TestRegion {
  readonly name: string;
  readonly server: RedisProcess;
  readonly config: Config;
  /** The engine's client (also used by tests to read state). */
  readonly redis: Redis;
  readonly engine: DecisionEngine;
  readonly registry: Registry;
  federation: Federation | undefined;
  startFederation(): Promise<Federation>;
  stopFederation(): Promise<void>;
}

export interface TestFederation {
  regions: TestRegion[];
  region(name: string): TestRegion;
  /** The proxy carrying gossip from `from` to `to` (when started with proxies). */
  link(from: string, to: string): LinkProxy;
  /** Cut (or heal) every link between `name` and the others, both directions. */
  isolate(name: string): void;
  heal(name: string): void;
  flushAll(): Promise<void>;
  close(): Promise<void>;
}

export interface TestFederationOptions {
  names?: string[];
  rules: ConfigInput['rules'];
  syncIntervalMs?: number;
  leakageBudget?: NonNullable<ConfigInput['federation']>['leakageBudget'];
  secret?: string;
  appendOnly?: boolean;
  proxies?: boolean;
  logger?: Logger;
  maxBatchKeys?: number;
  /** The engine's over-limit cache, off unless asked (tests count Redis decisions); the service has it on. */
  overLimitCache?: boolean;
}

export async function startTestFederation(options: TestFederationOptions): Promise<TestFederation> {
  const names = options.names ?? ['a', 'b', 'c'];
  const servers = await Promise.all(names.map(() => startRedis({ appendOnly: options.appendOnly ?? false })));
  const links = new Map<string, LinkProxy>();
  if (options.proxies) {
    for (const [i, from] of names.entries()) {
      for (const [j, to] of names.entries()) if (i !== j) links.set(`${from}>${to}`, await startLinkProxy(servers[j]!.port));
    }
  }
  const peerUrl = (from: string, j: number) => (options.proxies ? links.get(`${from}>${names[j]}`)!.url : servers[j]!.url);

  const startedOnce = new Set<string>();
  const regions = names.map((name, i): TestRegion => {
    const config = parseConfig({
      region: name,
      redis: { url: servers[i]!.url, commandTimeoutMs: 2_000, durable: options.appendOnly ?? false },
      federation: {
        syncIntervalMs: options.syncIntervalMs ?? 50,
        ...(options.leakageBudget !== undefined ? { leakageBudget: options.leakageBudget } : {}),
        ...(options.secret !== undefined ? { secret: options.secret } : {}),
        ...(options.maxBatchKeys !== undefined ? { maxBatchKeys: options.maxBatchKeys } : {}),
        maxClockSkewMs: 200,
        peers: names.flatMap((peer, j) => (j === i ? [] : [{ name: peer, redisUrl: peerUrl(name, j) }])),
      },
      rules: options.rules,
    });
    const redis = new Redis(servers[i]!.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    const registry = new Registry();
    const region: TestRegion = {
      name,
      server: servers[i]!,
      config,
      redis,
      engine: createRedisEngine({ config, redis, overLimitCache: options.overLimitCache ?? false }),
      registry,
      federation: undefined,
      async startFederation() {
        // The first start of these fresh regions is a brand-new federation's (docs/federation.md §4a: without the
        // declaration every peer being new too would fence); a later start (a restart) is checked as any other.
        const newFederation = !startedOnce.has(name);
        startedOnce.add(name);
        region.federation = await startFederation({ config, redis, registry, logger: options.logger ?? silentLogger(), newFederation });
        return region.federation;
      },
      async stopFederation() {
        const federation = region.federation;
        region.federation = undefined;
        await federation?.close();
      },
    };
    return region;
  });
  await Promise.all(regions.map((region) => region.startFederation()));

  const byName = (name: string) => {
    const region = regions.find((candidate) => candidate.name === name);
    if (!region) throw new Error(`no region ${name}`);
    return region;
  };
  const link = (from: string, to: string) => {
    const proxy = links.get(`${from}>${to}`);
    if (!proxy) throw new Error(`no proxy ${from}>${to} (start with proxies: true)`);
    return proxy;
  };
  const eachLinkOf = (name: string, act: (proxy: LinkProxy) => void) => {
    for (const other of names) if (other !== name) [link(name, other), link(other, name)].forEach(act);
  };
  return {
    regions,
    region: byName,
    link,
    isolate: (name) => eachLinkOf(name, (proxy) => proxy.cut()),
    heal: (name) => eachLinkOf(name, (proxy) => proxy.heal()),
    flushAll: () => Promise.all(regions.map((region) => region.federation?.flush())).then(() => undefined),
    async close() {
      await Promise.all(regions.map((region) => region.stopFederation().catch(() => undefined)));
      await Promise.all(regions.map((region) => region.redis.quit().catch(() => region.redis.disconnect())));
      await Promise.all([...links.values()].map((proxy) => proxy.close()));
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}

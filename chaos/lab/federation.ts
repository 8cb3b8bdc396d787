// A whole federation on one machine: a redis-server and a quotafed service process per region, and a
// Toxiproxy link for every ordered pair of regions. Redis servers and links live for the whole lab; services
// are started per run with that run's configs (sync interval and budget are start-up settings).
import { markShardsIntact, redisRunId } from '../../src/federation/recovery.ts';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { LeakageBudget } from '../../src/config/schema.ts';
import { waitReady } from '../../src/store/client.ts';
import { freePort, startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { REGIONS, type Policy, type RegionName } from '../types.ts';
import { startNetwork, type Network } from './network.ts';
import { writeRegionConfig } from './region-config.ts';
import { discardSnapshot, takeSnapshot } from './snapshot.ts';
import { startServiceProcess, type ServiceProcess } from '../../src/ops/service-process.ts';

export interface RunSettings {
  syncIntervalMs: number;
  leakageBudget: LeakageBudget;
  policy: Policy;
  failOpen: boolean;
  /** The product's Redis timeouts and breaker (local fallback on) instead of the lab's; rules fail closed. */
  productRedisDefaults?: boolean;
  /** rules[].maxWaitMs on both rules. */
  maxWaitMs?: number;
  /** Where this run's configs and service log go. */
  dir: string;
}

export interface Lab {
  readonly root: string;
  readonly network: Network;
  readonly adminToken: string;
  readonly redisUrls: Record<RegionName, string>;
  /** Direct connections to each region's Redis (the lab's own view: flushing, reading state hashes). */
  readonly direct: Record<RegionName, Redis>;
  serviceUrl(region: RegionName): string;
  startServices(settings: RunSettings): Promise<void>;
  stopServices(): Promise<void>;
  /** SIGKILL the region's service process (HTTP, engine and gossip workers die together). */
  killService(region: RegionName): Promise<void>;
  restartService(region: RegionName): Promise<void>;
  killRedis(region: RegionName): Promise<void>;
  /**
   * Start the region's redis-server again on the same port and directory: it loads the RDB snapshot when one was
   * taken (snapshotRedis), which is then discarded so that later restarts come back empty.
   */
  restartRedis(region: RegionName): Promise<void>;
  /** An RDB snapshot (BGSAVE, finished) of the region's Redis, for the next restartRedis to load. */
  snapshotRedis(region: RegionName): Promise<void>;
  /** The run_id of the region's redis-server process (another one after every restart). */
  redisRunId(region: RegionName): Promise<string>;
  /**
   * Rewrites the region's config with `policy` instead of the run's (everything else as started) and reloads it
   * through POST /admin/policy/reload; rejects unless the service took it.
   */
  reloadPolicy(region: RegionName, policy: Policy): Promise<void>;
  /** The policy the current run's services started with. */
  runPolicy(): Policy;
  /** The regions of the current run's federation: all of REGIONS at every start, fewer once one was removed. */
  members(): readonly RegionName[];
  /**
   * Stops the region's service (SIGTERM: a graceful shutdown, as an operator's; SIGKILL after REMOVAL_GRACE_MS) for
   * the rest of the run and takes it out of the members: configs written after this list the others only. Its Redis
   * stays up, holding what it had. Resolves with how long the stop took (ms).
   */
  removeRegion(region: RegionName): Promise<number>;
  /**
   * Rewrites the region's config with the current members as its peers (the run's settings and policy otherwise)
   * and restarts its service on it (SIGTERM, then a new process); resolves once the new process answers.
   */
  restartWithMembers(region: RegionName): Promise<void>;
  /** The last lines the region's current service process wrote (raw, pino JSON); empty when none runs. */
  serviceOutput(region: RegionName): string[];
  /** SIGSTOP the region's redis-server: connections stay open, nothing answers, no data is lost. */
  stallRedis(region: RegionName): void;
  /** SIGCONT after stallRedis. */
  resumeRedis(region: RegionName): void;
  /** Empty every Redis and bring every link back: the next run starts from nothing. */
  resetState(): Promise<void>;
  close(): Promise<void>;
}

export interface LabOptions {
  root: string;
  toxiproxyUrl?: string;
  progress?: (line: string) => void;
}

/** How long a removed region's service has to shut down on SIGTERM before it is SIGKILLed. */
export const REMOVAL_GRACE_MS = 5_000;

function directClient(url: string): Redis {
  const parsed = new URL(url);
  const client = new Redis({
    host: parsed.hostname,
    port: Number(parsed.port),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 2_000,
    retryStrategy: () => 100,
  });
  client.on('error', () => undefined);
  return client;
}

export async function startLab(options: LabOptions): Promise<Lab> {
  const progress = options.progress ?? (() => undefined);
  const redis = {} as Record<RegionName, RedisProcess>;
  const started: RedisProcess[] = [];
  let network: Network | undefined;
  try {
    for (const region of REGIONS) {
      redis[region] = await startRedis();
      started.push(redis[region]);
    }
    progress(`redis-server ${REGIONS.map((r) => `${r}:${redis[r].port}`).join(' ')}`);
    network = await startNetwork({
      root: options.root,
      toxiproxyUrl: options.toxiproxyUrl,
      redisPorts: Object.fromEntries(REGIONS.map((r) => [r, redis[r].port])) as Record<RegionName, number>,
    });
    progress(
      `toxiproxy ${network.ownServer ? "(quotafed's own server)" : '(external)'} at ${network.toxiproxyUrl}, ` +
        `${network.links().length} links`,
    );
  } catch (error) {
    await Promise.all(started.map((server) => server.stop()));
    throw error;
  }
  const net = network;
  // Each run's services take fresh ports (startServices): between runs a port is unbound, and a test file running
  // beside this one may pick it. A restart within a run keeps its region's port, which clients already hold.
  const ports = {} as Record<RegionName, number>;
  const redisUrls = Object.fromEntries(REGIONS.map((r) => [r, redis[r].url])) as Record<RegionName, string>;
  const direct = Object.fromEntries(REGIONS.map((r) => [r, directClient(redis[r].url)])) as Record<RegionName, Redis>;
  await Promise.all(REGIONS.map((r) => waitReady(direct[r], 5_000)));
  const adminToken = randomBytes(16).toString('hex');
  const secret = randomBytes(24).toString('hex');
  const services = new Map<RegionName, ServiceProcess>();
  const configPaths = new Map<RegionName, string>();
  let runSettings: RunSettings | undefined;
  let members: readonly RegionName[] = REGIONS;
  const redisDown = new Set<RegionName>();
  const stalled = new Set<RegionName>();
  const signalRedis = (region: RegionName, signal: NodeJS.Signals) => {
    const pid = redis[region].pid;
    if (pid !== undefined) process.kill(pid, signal);
  };
  let logPath: string | undefined;

  /** `<dir>/<region>.yaml` for the run's settings with `policy`; the same path every time for a region. */
  const writeConfig = (region: RegionName, settings: RunSettings, policy: Policy) =>
    writeRegionConfig(settings.dir, {
      region,
      port: ports[region],
      redisUrl: redis[region].url,
      peerRedisUrl: (to) => net.peerRedisUrl(region, to),
      syncIntervalMs: settings.syncIntervalMs,
      leakageBudget: settings.leakageBudget,
      policy,
      adminToken,
      secret,
      failOpen: settings.failOpen,
      productRedisDefaults: settings.productRedisDefaults ?? false,
      maxWaitMs: settings.maxWaitMs ?? 0,
      regions: members,
    });

  const launch = async (region: RegionName, fresh = false) => {
    // Each region is `quotafed serve --config <run config>` in its own process (service, engine, federation).
    const service = await startServiceProcess({
      region,
      configPath: configPaths.get(region)!,
      port: ports[region],
      root: options.root,
      // A run's first start is a brand-new federation (resetState emptied every Redis): declared, or every region
      // would find its peers new as well and fence (docs/federation.md §4a). Restarts within the run are checked.
      args: fresh ? ['--new-federation'] : [],
      write: (line) => {
        if (logPath) appendFileSync(logPath, `${line}\n`);
      },
      readyTimeoutMs: 60_000,
    });
    services.set(region, service);
  };

  const lab: Lab = {
    root: options.root,
    network: net,
    adminToken,
    redisUrls,
    direct,
    serviceUrl: (region) => `http://127.0.0.1:${ports[region]}`,
    async startServices(settings) {
      mkdirSync(settings.dir, { recursive: true });
      logPath = join(settings.dir, 'services.log');
      runSettings = settings;
      members = REGIONS;
      for (const region of REGIONS) ports[region] = await freePort();
      for (const region of REGIONS) configPaths.set(region, writeConfig(region, settings, settings.policy));
      const results = await Promise.allSettled(REGIONS.map((region) => launch(region, true)));
      const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
      if (failed) {
        await lab.stopServices();
        throw failed.reason;
      }
    },
    runPolicy() {
      if (!runSettings) throw new Error('no run started');
      return runSettings.policy;
    },
    async reloadPolicy(region, policy) {
      if (!runSettings) throw new Error('no run started: nothing to reload');
      writeConfig(region, runSettings, policy);
      const response = await fetch(`${lab.serviceUrl(region)}/admin/policy/reload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}` },
        signal: AbortSignal.timeout(5_000),
      });
      const result = (await response.json().catch(() => ({}))) as { ok?: boolean; changed?: boolean; error?: string };
      if (!response.ok || result.ok !== true || result.changed !== true)
        throw new Error(`${region} did not take the reload (HTTP ${response.status}): ${result.error ?? JSON.stringify(result)}`);
    },
    members: () => members,
    async removeRegion(region) {
      const started = performance.now();
      await services.get(region)?.stop(REMOVAL_GRACE_MS);
      services.delete(region);
      members = members.filter((member) => member !== region);
      return performance.now() - started;
    },
    async restartWithMembers(region) {
      if (!runSettings) throw new Error('no run started: nothing to restart');
      if (!members.includes(region)) throw new Error(`${region} is not a member of the federation any more`);
      configPaths.set(region, writeConfig(region, runSettings, runSettings.policy));
      await services.get(region)?.stop(5_000);
      services.delete(region);
      await launch(region);
    },
    serviceOutput: (region) => services.get(region)?.recentOutput() ?? [],
    async stopServices() {
      await Promise.all([...services.values()].map((service) => service.stop(5_000)));
      services.clear();
    },
    async killService(region) {
      const service = services.get(region);
      if (!service?.pid || !service.running()) return;
      process.kill(service.pid, 'SIGKILL');
      await service.stop(0);
      services.delete(region);
    },
    async restartService(region) {
      await launch(region);
    },
    async killRedis(region) {
      redisDown.add(region);
      await redis[region].kill('SIGKILL');
    },
    async restartRedis(region) {
      await redis[region].restart();
      // Loaded (the server answers only after loading it): no later restart may bring this snapshot back.
      discardSnapshot(redis[region].dir);
      redisDown.delete(region);
    },
    async snapshotRedis(region) {
      await takeSnapshot(direct[region]);
    },
    redisRunId: (region) => redisRunId(direct[region]),
    stallRedis(region) {
      stalled.add(region);
      signalRedis(region, 'SIGSTOP');
    },
    resumeRedis(region) {
      signalRedis(region, 'SIGCONT');
      stalled.delete(region);
    },
    async resetState() {
      await net.reset();
      for (const region of [...stalled]) lab.resumeRedis(region);
      for (const region of REGIONS) {
        // A snapshot a failed run left behind must not come back at some later restart.
        discardSnapshot(redis[region].dir);
        if (redisDown.has(region)) await lab.restartRedis(region);
        await waitReady(direct[region], 5_000);
        await direct[region].flushall();
        // A shard without its marker reads as "this Redis lost its data" and forfeits the current window
        // (the recovery fence). A fresh run is not a data loss: start as a federation that has been running.
        await markShardsIntact(direct[region]);
      }
    },
    async close() {
      for (const region of [...stalled]) lab.resumeRedis(region);
      await lab.stopServices();
      for (const client of Object.values(direct)) client.disconnect();
      await net.close();
      await Promise.all(started.map((server) => server.stop()));
    },
  };
  return lab;
}

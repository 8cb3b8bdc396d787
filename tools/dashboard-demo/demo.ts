// A three-region federation on this machine for the dashboard: three real redis-servers, three region
// processes (tools/dashboard-demo/region.ts) each serving /dashboard in gateway mode in front of the demo
// upstream, and a small steady load of real requests on one hot key so the page has something to show. The browser test and
// `tsx tools/dashboard-demo/main.ts` use it.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { ConfigInput } from '../../src/config/schema.ts';
import { startDemoUpstream, type DemoUpstream } from '../../src/demo/upstream.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { lineSplitter } from '../../src/ops/service-process.ts';
import { stopChild } from '../../src/ops/stop-child.ts';
import type { AnnotationInput } from '../../src/dashboard/annotations.ts';
import type { DemoRegionSpec } from './region.ts';
import type { WatchedKey } from '../../src/dashboard/key-view.ts';

export const DEMO_REGIONS = ['ap-south', 'eu-west', 'us-east'] as const;
export const DEMO_API_KEY = 'demo-hot-key';

export interface DemoRegion {
  name: string;
  /** The region's gateway (requests carry `x-api-key`). */
  url: string;
  dashboardUrl: string;
  redis: RedisProcess;
  federated: boolean;
}

export interface DashboardDemo {
  readonly regions: readonly DemoRegion[];
  region(name: string): DemoRegion;
  /** Kill a region's redis-server: every link into that region goes down (its peers cannot deliver to it). */
  partition(name: string): Promise<void>;
  heal(name: string): Promise<void>;
  /** POST annotations to one region's dashboard, or to all. */
  annotate(body: AnnotationInput, region?: string): Promise<void>;
  /** Measured by the load generator: hot-key admissions in the current window beyond the limit. */
  leakage(): LeakageMeasure;
  stop(): Promise<void>;
}

export interface DashboardDemoOptions {
  /** Repository root (holds node_modules/tsx). */
  root: string;
  /** Requests per second per region on the hot key (default 8; 0 for none). */
  ratePerRegion?: number;
  log?: (line: string) => void;
  /** The regions' log level (default warn: a partition logs its failed gossip rounds). */
  logLevel?: 'warn' | 'error';
  startTimeoutMs?: number;
}

export interface LeakageMeasure {
  key: string;
  limit: number;
  budget: number;
  admitted: number;
  leakage: number;
}

interface Child {
  process: ChildProcess;
  ready: Promise<{ url: string; dashboardUrl: string; federated: boolean }>;
}

export const HOT_LIMIT = 300;
export const HOT_PERIOD_MS = 30_000;
export const BUDGET_PERCENT = 5;

export function demoConfig(
  name: string,
  redisUrls: Record<string, string>,
  upstreamUrl: string,
  options: { logLevel: 'warn' | 'error' },
): ConfigInput {
  return {
    region: name,
    port: 0,
    upstream: { url: upstreamUrl, timeoutMs: 2_000 },
    redis: { url: redisUrls[name]!, commandTimeoutMs: 200 },
    logLevel: options.logLevel,
    breaker: { failureThreshold: 3, probeIntervalMs: 500 },
    federation: {
      syncIntervalMs: 100,
      leakageBudget: `${BUDGET_PERCENT}%`,
      secret: 'dashboard-demo-federation-secret',
      peers: DEMO_REGIONS.filter((peer) => peer !== name).map((peer) => ({ name: peer, redisUrl: redisUrls[peer]! })),
    },
    rules: [
      { name: 'hot', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: HOT_LIMIT, period: HOT_PERIOD_MS },
      {
        name: 'search',
        match: { identity: 'apiKey', endpoints: ['/search'] },
        by: ['apiKey', 'endpoint'],
        algorithm: 'slidingWindow',
        limit: 60,
        period: 10_000,
      },
    ],
  };
}

export const DEMO_WATCH: WatchedKey[] = [
  { rule: 'hot', apiKey: DEMO_API_KEY, label: 'hot key' },
  { rule: 'search', apiKey: DEMO_API_KEY, path: '/search', label: 'hot key /search' },
];

function spawnRegion(root: string, spec: DemoRegionSpec, log: (line: string) => void): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'tools/dashboard-demo/region.ts'), JSON.stringify(spec)], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const name = String(spec.config.region);
  const ready = new Promise<{ url: string; dashboardUrl: string; federated: boolean }>((resolve, reject) => {
    child.stdout!.on(
      'data',
      lineSplitter((line) => {
        if (line.startsWith('{"ready":true')) resolve(JSON.parse(line) as { url: string; dashboardUrl: string; federated: boolean });
        else log(`[${name}] ${line}`);
      }),
    );
    child.stderr!.on('data', (chunk: Buffer) => log(`[${name}] ${chunk.toString('utf8').trimEnd()}`));
    child.once('exit', (code, signal) => reject(new Error(`demo region ${name} exited (${code ?? signal}) before it was ready`)));
  });
  ready.catch(() => undefined);
  return { process: child, ready };
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

const PATHS = ['/search', '/items', '/search', '/checkout'];

/**
 * A steady, bounded trickle of real requests on the hot key through each region's gateway: `rate` per second
 * per region, one at a time per region. Counts what the federation admitted per window of the hot rule.
 */
function startLoad(regions: readonly DemoRegion[], rate: number, admitted: Map<number, number>): () => Promise<void> {
  if (rate <= 0) return async () => undefined;
  let stopped = false;
  const loops = regions.map(async (region, index) => {
    const period = 1_000 / rate;
    let sent = 0;
    while (!stopped) {
      const path = PATHS[sent % PATHS.length]!;
      sent += 1;
      const windowId = Math.floor(Date.now() / HOT_PERIOD_MS);
      const status = await fetch(`${region.url}${path}`, { headers: { 'x-api-key': DEMO_API_KEY }, signal: AbortSignal.timeout(2_000) })
        .then(async (response) => {
          await response.arrayBuffer();
          return response.status;
        })
        .catch(() => 0);
      // A request is admitted by the hot rule only when every rule admitted it (a denial consumes nothing).
      if (status === 200) {
        admitted.set(windowId, (admitted.get(windowId) ?? 0) + 1);
        for (const old of admitted.keys()) if (old < windowId - 2) admitted.delete(old);
      }
      // Staggered so the three regions do not fire in lockstep.
      await new Promise((resolve) => setTimeout(resolve, period + index * 3));
    }
  });
  return async () => {
    stopped = true;
    await Promise.all(loops);
  };
}

export async function startDashboardDemo(options: DashboardDemoOptions): Promise<DashboardDemo> {
  const log = options.log ?? (() => undefined);
  const redisServers: RedisProcess[] = [];
  const children: Child[] = [];
  const admitted = new Map<number, number>();
  let upstream: DemoUpstream | undefined;
  let stopLoad: () => Promise<void> = async () => undefined;

  const stop = async () => {
    await stopLoad();
    await Promise.all(children.map((child) => stopChild(child.process)));
    await upstream?.close();
    await Promise.all(redisServers.map((server) => server.stop()));
  };

  try {
    for (const _ of DEMO_REGIONS) redisServers.push(await startRedis());
    upstream = await startDemoUpstream({ port: 0 });
    const redisUrls = Object.fromEntries(DEMO_REGIONS.map((name, index) => [name, redisServers[index]!.url]));
    for (const name of DEMO_REGIONS) {
      const config = demoConfig(name, redisUrls, upstream.url, { logLevel: options.logLevel ?? 'warn' });
      children.push(spawnRegion(options.root, { config, watch: DEMO_WATCH, dashboardPort: 0 }, log));
    }
    const started = await withTimeout(
      Promise.all(children.map((child) => child.ready)),
      options.startTimeoutMs ?? 45_000,
      'starting the demo regions',
    );
    const regions: DemoRegion[] = DEMO_REGIONS.map((name, index) => ({ name, ...started[index]!, redis: redisServers[index]! }));
    stopLoad = startLoad(regions, options.ratePerRegion ?? 8, admitted);

    const region = (name: string) => {
      const found = regions.find((entry) => entry.name === name);
      if (!found) throw new Error(`no demo region ${name}`);
      return found;
    };
    const annotateOne = async (target: DemoRegion, body: AnnotationInput) => {
      const response = await fetch(`${target.dashboardUrl}/annotations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(2_000),
      });
      if (!response.ok) throw new Error(`annotation rejected by ${target.name}: ${response.status} ${await response.text()}`);
    };
    return {
      regions,
      region,
      partition: (name) => region(name).redis.kill(),
      heal: (name) => region(name).redis.restart(),
      annotate: async (body, name) => {
        await Promise.all((name === undefined ? regions : [region(name)]).map((target) => annotateOne(target, body)));
      },
      leakage: () => {
        const count = admitted.get(Math.floor(Date.now() / HOT_PERIOD_MS)) ?? 0;
        const budget = Math.floor((HOT_LIMIT * BUDGET_PERCENT) / 100);
        return { key: 'hot key', limit: HOT_LIMIT, budget, admitted: count, leakage: Math.max(0, count - HOT_LIMIT) };
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

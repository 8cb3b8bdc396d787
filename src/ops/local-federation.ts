// A whole federation on this machine: a redis-server per region, the demo upstream, and each regional service
// as a child process. `npm start` drives it (src/cli/launch.ts); tests drive it on free ports.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startDemoUpstream, type DemoUpstream } from '../demo/upstream.ts';
import { CLI_ENTRY } from '../paths.ts';
import { localRegions, type PortOverrides } from './local-regions.ts';
import { portIsFree, redisServerAvailable, REDIS_MISSING_HINT, startRedis, type RedisProcess } from './redis-process.ts';
import { startServiceProcess, type ServiceProcess } from './service-process.ts';

export interface LocalFederationOptions extends PortOverrides {
  /** Package root: holds regions/ (the services run from it). */
  root: string;
  /** Defaults to `<root>/regions`. */
  regionsDir?: string;
  /** Short human lines while starting and stopping. */
  progress?: (line: string) => void;
  /** The services' output, prefixed by region. */
  output?: (line: string) => void;
  onServiceExit?: (region: string, code: number | null, signal: NodeJS.Signals | null) => void;
  color?: boolean;
  env?: NodeJS.ProcessEnv;
  serviceReadyTimeoutMs?: number;
}

export interface RunningRegion {
  name: string;
  url: string;
  redisUrl: string;
  configPath: string;
  service: ServiceProcess;
}

export interface LocalFederation {
  readonly regions: readonly RunningRegion[];
  readonly upstreamUrl: string | undefined;
  /** Every child process id (services and redis-servers), for a last-resort kill when the launcher dies. */
  pids(): number[];
  /** Services first (they flush gossip into Redis), then the upstream, then Redis. */
  stop(): Promise<void>;
}

export class RedisMissingError extends Error {
  constructor() {
    super(REDIS_MISSING_HINT);
    this.name = 'RedisMissingError';
  }
}

export class PortsInUseError extends Error {
  constructor(readonly taken: ReadonlyArray<{ port: number; what: string }>) {
    super(`ports already in use: ${taken.map(({ port, what }) => `${port} (${what})`).join(', ')}`);
    this.name = 'PortsInUseError';
  }
}

export async function startLocalFederation(options: LocalFederationOptions): Promise<LocalFederation> {
  const progress = options.progress ?? (() => undefined);
  if (!redisServerAvailable()) throw new RedisMissingError();
  const regions = localRegions(options.regionsDir ?? join(options.root, 'regions'), options);
  const upstreamPort = regions.find((region) => region.upstreamPort !== undefined)?.upstreamPort;
  const wanted = [
    ...regions.map((region) => ({ port: region.redisPort, what: `redis-server for ${region.name}` })),
    ...regions.map((region) => ({ port: region.servicePort, what: `${region.name} service` })),
    ...(upstreamPort === undefined ? [] : [{ port: upstreamPort, what: 'demo upstream' }]),
  ];
  const taken: Array<{ port: number; what: string }> = [];
  for (const entry of wanted) if (!(await portIsFree(entry.port))) taken.push(entry);
  if (taken.length > 0) throw new PortsInUseError(taken);
  if (!existsSync(CLI_ENTRY)) throw new Error(`${CLI_ENTRY} is missing: the regional service is not in this checkout`);

  const redisServers: RedisProcess[] = [];
  const services: ServiceProcess[] = [];
  let upstream: DemoUpstream | undefined;
  const stop = async () => {
    const running = services.filter((service) => service.running());
    if (running.length > 0) progress(`stopping ${running.map((service) => service.region).join(', ')} …`);
    await Promise.all(services.map((service) => service.stop()));
    await upstream?.close();
    if (redisServers.length > 0) progress(`stopping redis-server on ${redisServers.map((server) => server.port).join(', ')} …`);
    await Promise.all(redisServers.map((server) => server.stop()));
  };

  try {
    for (const region of regions) {
      progress(`starting redis-server for ${region.name} on 127.0.0.1:${region.redisPort} …`);
      redisServers.push(await startRedis({ port: region.redisPort, ownProcessGroup: true }));
    }
    if (upstreamPort !== undefined) {
      upstream = await startDemoUpstream({ port: upstreamPort });
      progress(`demo upstream on ${upstream.url}`);
    }
    progress(`starting ${regions.map((region) => region.name).join(', ')} (first start compiles TypeScript; a few seconds) …`);
    const started = await Promise.allSettled(
      regions.map(async (region) => {
        const service = await startServiceProcess({
          region: region.name,
          configPath: region.configPath,
          port: region.servicePort,
          root: options.root,
          // Every redis-server here was just started empty: a brand-new federation (docs/federation.md §4a).
          args: ['--new-federation'],
          write: options.output ?? (() => undefined),
          onUnexpectedExit: (code, signal) => options.onServiceExit?.(region.name, code, signal),
          env: options.env,
          color: options.color,
          readyTimeoutMs: options.serviceReadyTimeoutMs,
        });
        services.push(service);
        progress(`${region.name} ready on ${service.url}`);
        return service;
      }),
    );
    const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
  } catch (error) {
    await stop();
    throw error;
  }

  const byRegion = new Map(services.map((service) => [service.region, service]));
  return {
    regions: regions.map((region, index) => ({
      name: region.name,
      url: `http://127.0.0.1:${region.servicePort}`,
      redisUrl: redisServers[index]!.url,
      configPath: region.configPath,
      service: byRegion.get(region.name)!,
    })),
    upstreamUrl: upstream?.url,
    pids: () =>
      [
        ...services.filter((service) => service.running()).map((service) => service.pid),
        ...redisServers.map((server) => server.pid),
      ].filter((pid): pid is number => pid !== undefined),
    stop,
  };
}

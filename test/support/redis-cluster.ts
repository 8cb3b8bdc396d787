// A real Redis Cluster on loopback: `redis-server` processes in cluster mode joined with
// `redis-cli --cluster create`. Test tooling: used by the cluster tests (and anyone who wants a regional cluster locally),
// so the engine, BullMQ and failover run against the same thing production runs.
import { spawn, spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { eventually } from './wait.ts';

export interface RedisClusterOptions {
  /** Primaries (each owns a third of the 16384 slots with the default 3). */
  primaries?: number;
  /** Replicas per primary; failover needs at least 1. */
  replicasPerPrimary?: number;
  /** Bound on the whole start (create + replicas in sync). */
  readyTimeoutMs?: number;
  /** Passed through to each redis-server (see RedisProcessOptions). */
  ownProcessGroup?: boolean;
}

export interface ClusterNodeInfo {
  id: string;
  port: number;
  role: 'primary' | 'replica';
  /** The node id a replica follows. */
  primaryId: string | undefined;
  failed: boolean;
}

export interface FailoverResult {
  /** The replica that took over. */
  promotedPort: number;
  /** From the kill until every live node reports cluster_state:ok with the replica as primary. */
  elapsedMs: number;
}

export interface RedisCluster {
  readonly nodes: readonly RedisProcess[];
  /** redis:// URLs of every node; any of them is a valid seed (config `redis.clusterNodes`). */
  readonly seedUrls: readonly string[];
  /** The same seeds in the form `new Cluster(seedNodes)` takes. */
  readonly seedNodes: ReadonlyArray<{ host: string; port: number }>;
  /** The topology as a live node sees it now. */
  topology(): Promise<ClusterNodeInfo[]>;
  /** Port of the primary that serves the slot of `key`. */
  primaryPortFor(key: string): Promise<number>;
  /** SIGKILL one primary; resolves once its replica is primary and the cluster is ok again. */
  failover(primaryPort: number, timeoutMs?: number): Promise<FailoverResult>;
  /** Start a killed node again; it rejoins (as a replica of whoever took over its slots). */
  restartNode(port: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export function redisCliAvailable(): boolean {
  return spawnSync('redis-cli', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Talk to one node over a short-lived connection; undefined when the node does not answer. */
async function onNode<T>(port: number, use: (redis: Redis) => Promise<T>): Promise<T | undefined> {
  const redis = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    connectTimeout: 1_000,
    commandTimeout: 2_000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await use(redis);
  } catch {
    return undefined;
  } finally {
    redis.disconnect();
  }
}

function ask(port: number, command: string, ...args: string[]): Promise<string | undefined> {
  return onNode(port, async (redis) => String(await redis.call(command, ...args)));
}

function parseNodes(text: string): ClusterNodeInfo[] {
  return text
    .trim()
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const [id, address, flagText, primary] = line.split(' ');
      const port = Number(/:(\d+)@/.exec(address ?? '')?.[1]);
      const flags = new Set((flagText ?? '').split(','));
      return {
        id: id!,
        port,
        role: flags.has('master') ? ('primary' as const) : ('replica' as const),
        primaryId: primary === '-' ? undefined : primary,
        failed: flags.has('fail') || flags.has('fail?'),
      };
    });
}

function runRedisCli(args: string[], timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('redis-cli', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`redis-cli ${args.slice(0, 2).join(' ')} failed (code ${code}):\n${output.slice(-2_000)}`));
    });
  });
}

/** Every live node says ok, sees all slots, and every replica has finished its initial sync. */
async function healthy(ports: readonly number[]): Promise<boolean> {
  for (const port of ports) {
    const info = await ask(port, 'CLUSTER', 'INFO');
    if (info === undefined || !info.includes('cluster_state:ok') || !info.includes('cluster_slots_ok:16384')) return false;
    const replication = await ask(port, 'INFO', 'replication');
    if (replication === undefined) return false;
    if (replication.includes('role:slave') && !replication.includes('master_link_status:up')) return false;
  }
  return true;
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  if (!redisCliAvailable())
    throw new Error('redis-cli was not found on PATH; it ships with redis-server (Debian/Ubuntu: `apt-get install redis-tools`).');
  const primaries = options.primaries ?? 3;
  const replicas = options.replicasPerPrimary ?? 1;
  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  const count = primaries * (1 + replicas);
  const nodes: RedisProcess[] = [];
  try {
    for (let i = 0; i < count; i += 1) nodes.push(await startRedis({ cluster: true, ownProcessGroup: options.ownProcessGroup ?? false }));
    await runRedisCli(
      ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
      readyTimeoutMs,
    );
    const ports = nodes.map((node) => node.port);
    await eventually(
      async () => ((await healthy(ports)) ? true : undefined),
      readyTimeoutMs,
      'redis cluster: cluster_state:ok on every node with replicas in sync',
      100,
    );
  } catch (error) {
    await Promise.all(nodes.map((node) => node.stop()));
    throw error;
  }

  const down = new Set<number>();
  const livePorts = () => nodes.map((node) => node.port).filter((port) => !down.has(port));
  const byPort = (port: number) => {
    const node = nodes.find((candidate) => candidate.port === port);
    if (!node) throw new Error(`redis cluster: no node on port ${port}`);
    return node;
  };

  const topology = async (): Promise<ClusterNodeInfo[]> => {
    for (const port of livePorts()) {
      const text = await ask(port, 'CLUSTER', 'NODES');
      if (text !== undefined) return parseNodes(text);
    }
    throw new Error('redis cluster: no node answers CLUSTER NODES');
  };

  return {
    nodes,
    seedUrls: nodes.map((node) => node.url),
    seedNodes: nodes.map((node) => ({ host: '127.0.0.1', port: node.port })),
    topology,
    async primaryPortFor(key) {
      for (const port of livePorts()) {
        const owner = await onNode(port, async (redis) => {
          const slot = Number(await redis.call('CLUSTER', 'KEYSLOT', key));
          // CLUSTER SLOTS is what ioredis routes by: [start, end, [host, port, id], ...replicas].
          const ranges = (await redis.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]]]>;
          const range = ranges.find(([start, end]) => slot >= start && slot <= end);
          return range === undefined ? undefined : Number(range[2][1]);
        });
        if (owner !== undefined) return owner;
      }
      throw new Error(`redis cluster: no primary found for ${key}`);
    },
    async failover(primaryPort, timeoutMs = 20_000) {
      const before = await topology();
      const victim = before.find((node) => node.port === primaryPort);
      if (victim?.role !== 'primary') throw new Error(`redis cluster: port ${primaryPort} is not a primary`);
      const followers = before.filter((node) => node.primaryId === victim.id && !node.failed).map((node) => node.port);
      if (followers.length === 0) throw new Error(`redis cluster: primary ${primaryPort} has no live replica to promote`);
      const started = Date.now();
      await byPort(primaryPort).kill('SIGKILL');
      down.add(primaryPort);
      const promotedPort = await eventually(
        async () => {
          const now = await topology();
          return now.find((node) => followers.includes(node.port) && node.role === 'primary' && !node.failed)?.port;
        },
        timeoutMs,
        `redis cluster: a replica of ${primaryPort} to be promoted`,
        100,
      );
      await eventually(
        async () => ((await healthy(livePorts())) ? true : undefined),
        Math.max(1_000, timeoutMs - (Date.now() - started)),
        'redis cluster: cluster_state:ok after the failover',
        100,
      );
      return { promotedPort, elapsedMs: Date.now() - started };
    },
    async restartNode(port, timeoutMs = 20_000) {
      await byPort(port).restart();
      down.delete(port);
      await eventually(
        async () => ((await healthy(livePorts())) ? true : undefined),
        timeoutMs,
        `redis cluster: node ${port} to rejoin`,
        100,
      );
    },
    async stop() {
      await Promise.all(nodes.map((node) => node.stop()));
    },
  };
}

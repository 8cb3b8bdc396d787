// Starts and stops real `redis-server` processes on free loopback ports.
// Used by the test harness, the local launcher (`npm start`) and the chaos lab, so that all three
// run the same Redis the same way.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisProcessOptions {
  /** Port to listen on; a free one is picked when omitted. */
  port?: number;
  /** Persist with AOF (appendonly yes, appendfsync always) so a restart keeps the data. */
  appendOnly?: boolean;
  /** Start as a cluster node (cluster-enabled yes). */
  cluster?: boolean;
  /** Extra `--flag value` pairs passed to redis-server. */
  extraArgs?: string[];
  /** Data directory; a fresh temporary one when omitted. */
  dir?: string;
  /**
   * Run redis-server in its own process group, so a Ctrl-C in the terminal reaches only the parent, which can
   * then stop its services before their Redis (the launcher's shutdown order).
   */
  ownProcessGroup?: boolean;
}

export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  readonly pid: number | undefined;
  /** SIGKILL (or another signal) without cleanup: the data directory stays for a restart. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Start the same server again on the same port and directory. */
  restart(): Promise<void>;
  /** Stop for good and remove the temporary directory. */
  stop(): Promise<void>;
}

export function redisServerAvailable(): boolean {
  const probe = spawnSync('redis-server', ['--version'], { stdio: 'ignore' });
  return probe.status === 0;
}

export const REDIS_MISSING_HINT =
  'redis-server was not found on PATH. Install it (Debian/Ubuntu: `apt-get install redis-server`; macOS: `brew ' +
  'install redis`) and try again.';

/** The kernel's ephemeral range (outgoing connections take their local port from it), Linux's default elsewhere. */
function ephemeralRangeStart(): number {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 2_048 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

const handedOut = new Set<number>();

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A loopback port that is free now, below the ephemeral range: a port the kernel hands out (`listen(0)`) may be
 * taken by any outgoing connection's local end before the caller binds it, which made a service start fail with
 * EADDRINUSE under a busy test run. Ports below the range are taken only by listeners; this process never hands
 * out the same one twice. With `clusterBus`, the port 10,000 above it (a Redis Cluster node's bus, which
 * redis-server binds too) is below the range and free as well: a node's bus in the range was taken by an outgoing
 * connection once (engine-cluster.test.ts, "Failed listening on port 36766 (cluster)").
 *
 * @example
 * const port = await freePort();
 * const redis = await startRedis({ port });
 */
export async function freePort(options: { clusterBus?: boolean } = {}): Promise<number> {
  const offset = options.clusterBus ? CLUSTER_BUS_OFFSET : 0;
  const high = ephemeralRangeStart() - offset;
  const low = Math.min(10_000, high - 1_024);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (handedOut.has(port) || (offset > 0 && handedOut.has(port + offset))) continue;
    handedOut.add(port);
    if (offset > 0) handedOut.add(port + offset);
    if ((await bindable(port)) && (offset === 0 || (await bindable(port + offset)))) return port;
  }
  throw new Error(`no free loopback port between ${low} and ${high} after 200 tries`);
}

/** A Redis Cluster node's bus port is its port plus this (redis-server's default, `cluster-port 0`). */
const CLUSTER_BUS_OFFSET = 10_000;

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let buffer = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      // A server that requires AUTH answers -NOAUTH: it is up all the same.
      if (buffer.includes('\r\n')) done(buffer.startsWith('+PONG') || buffer.startsWith('-NOAUTH'));
    });
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
  });
}

/** True when nothing listens on 127.0.0.1:port (so a redis-server there would not answer someone else's PING). */
export async function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export async function startRedis(options: RedisProcessOptions = {}): Promise<RedisProcess> {
  if (!redisServerAvailable()) throw new Error(REDIS_MISSING_HINT);
  const port = options.port ?? (await freePort({ clusterBus: options.cluster === true }));
  // Without this check a server already on the port would answer our readiness PING for the one that failed.
  if (options.port !== undefined && !(await portIsFree(port)))
    throw new Error(`port ${port} is already in use; cannot start redis-server there`);
  const ownsDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), `quotafed-redis-${port}-`));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.appendOnly ? 'yes' : 'no',
    '--appendfsync',
    'always',
    '--maxmemory-policy',
    'noeviction',
    '--protected-mode',
    'no',
    '--loglevel',
    'warning',
    '--logfile',
    join(dir, 'redis.log'),
  ];
  if (options.cluster) {
    args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-node-timeout', '2000');
  }
  args.push(...(options.extraArgs ?? []));

  let child: ChildProcess | undefined;
  const launch = async () => {
    child = spawn('redis-server', args, { stdio: 'ignore', detached: options.ownProcessGroup ?? false });
    const exited = new Promise<never>((_, reject) =>
      child!.once('exit', (code) => reject(new Error(`redis-server on port ${port} exited early (code ${code}); see ${dir}/redis.log`))),
    );
    exited.catch(() => undefined);
    await Promise.race([waitUntil(() => ping(port), 10_000, `redis-server on port ${port}`), exited]);
  };
  const terminate = async (signal: NodeJS.Signals) => {
    const current = child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => current.once('exit', () => resolve()));
    current.kill(signal);
    await gone;
  };

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get pid() {
      return child?.pid;
    },
    kill: (signal: NodeJS.Signals = 'SIGKILL') => terminate(signal),
    restart: async () => {
      await terminate('SIGKILL');
      await launch();
    },
    stop: async () => {
      await terminate('SIGKILL');
      if (ownsDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

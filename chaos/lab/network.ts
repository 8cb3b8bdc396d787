// The links between regions: one Toxiproxy proxy per direction ("us-east_to_eu-west" carries everything
// us-east sends to eu-west's Redis). A real Toxiproxy when TOXIPROXY_URL is set, else the project's own
// compatible server in a child process (its own event loop, so proxying never competes with the load generator).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Toxiproxy, type Proxy } from 'toxiproxy-node-client';
import { freePort } from '../../src/ops/redis-process.ts';
import { stopChild } from '../../src/ops/stop-child.ts';
import { REGIONS, type RegionName } from '../types.ts';

export interface Link {
  from: RegionName;
  to: RegionName;
}

export interface Network {
  /** Which Toxiproxy drives the links (URL and whether it is ours). */
  readonly toxiproxyUrl: string;
  readonly ownServer: boolean;
  /** The URL region `from` uses for region `to`'s Redis. */
  peerRedisUrl(from: RegionName, to: RegionName): string;
  links(): Link[];
  setEnabled(link: Link, enabled: boolean): Promise<void>;
  /** Adds `latencyMs` ± `jitterMs` to both directions of the TCP stream of a link (one-way delay each way). */
  addLatency(link: Link, latencyMs: number, jitterMs: number, name: string): Promise<void>;
  removeToxic(link: Link, name: string): Promise<void>;
  /** Every link up, no toxics (Toxiproxy's POST /reset). */
  reset(): Promise<void>;
  close(): Promise<void>;
}

export function linkName(link: Link): string {
  return `${link.from}_to_${link.to}`;
}

export function allLinks(): Link[] {
  return REGIONS.flatMap((from) => REGIONS.filter((to) => to !== from).map((to) => ({ from, to })));
}

async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(`${url}/version`, { signal: AbortSignal.timeout(1_000) });
    return response.ok;
  } catch {
    return false;
  }
}

async function startOwnToxiproxy(root: string): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'chaos/toxiproxy/main.ts'), '--host', '127.0.0.1', '--port', String(port)],
    {
      cwd: root,
      env: { ...process.env, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  while (!(await answers(url))) {
    if (child.exitCode !== null) throw new Error(`the Toxiproxy server exited during start (code ${child.exitCode})`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('the Toxiproxy server did not answer within 30 s');
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url, child };
}

export interface NetworkOptions {
  root: string;
  /** Each region's Redis port (the proxies' upstreams). */
  redisPorts: Record<RegionName, number>;
  toxiproxyUrl?: string;
  /** Host the proxies listen on and the regions dial (a Toxiproxy in a container needs its own). */
  listenHost?: string;
}

export async function startNetwork(options: NetworkOptions): Promise<Network> {
  const own = options.toxiproxyUrl ? undefined : await startOwnToxiproxy(options.root);
  const url = options.toxiproxyUrl ?? own!.url;
  const client = new Toxiproxy(url);
  const host = options.listenHost ?? '127.0.0.1';
  const proxies = new Map<string, { proxy: Proxy; port: number }>();
  try {
    for (const link of allLinks()) {
      const name = linkName(link);
      const existing = await client.get(name).catch(() => undefined);
      if (existing) await existing.remove();
      const port = await freePort();
      const proxy = await client.createProxy({
        name,
        listen: `${host}:${port}`,
        upstream: `127.0.0.1:${options.redisPorts[link.to]}`,
        enabled: true,
      });
      proxies.set(name, { proxy, port });
    }
  } catch (error) {
    own?.child.kill('SIGKILL');
    throw error;
  }
  const proxyOf = (link: Link) => {
    const entry = proxies.get(linkName(link));
    if (!entry) throw new Error(`no proxy for ${linkName(link)}`);
    return entry;
  };

  return {
    toxiproxyUrl: url,
    ownServer: own !== undefined,
    peerRedisUrl: (from, to) => `redis://${host}:${proxyOf({ from, to }).port}`,
    links: allLinks,
    async setEnabled(link, enabled) {
      const entry = proxyOf(link);
      entry.proxy = await entry.proxy.update({ enabled, listen: entry.proxy.listen, upstream: entry.proxy.upstream });
    },
    async addLatency(link, latencyMs, jitterMs, name) {
      const { proxy } = proxyOf(link);
      for (const stream of ['upstream', 'downstream'] as const) {
        await proxy.addToxic({
          name: `${name}-${stream}`,
          type: 'latency',
          stream,
          toxicity: 1,
          attributes: { latency: latencyMs, jitter: jitterMs },
        });
      }
    },
    async removeToxic(link, name) {
      const { proxy } = proxyOf(link);
      for (const stream of ['upstream', 'downstream']) {
        const toxic = await proxy.getToxic(`${name}-${stream}`).catch(() => undefined);
        await toxic?.remove();
      }
    },
    async reset() {
      await client.reset();
      for (const entry of proxies.values()) entry.proxy = await client.get(entry.proxy.name);
    },
    async close() {
      await Promise.all([...proxies.values()].map(({ proxy }) => proxy.remove().catch(() => undefined)));
      if (own) await stopChild(own.child, 3_000);
    },
  };
}

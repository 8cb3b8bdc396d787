// The lab's wiring: each directed link is a Toxiproxy proxy in front of the destination region's Redis, and
// cutting a link cuts exactly that direction.
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNetwork, type Network } from '../../chaos/lab/network.ts';
import { cutLinks } from '../../chaos/faults.ts';
import { REGIONS, type RegionName } from '../../chaos/types.ts';
import { useRedis } from '../harness/redis.ts';

const root = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const servers = await Promise.all(REGIONS.map(() => useRedis()));
const serverOf = (region: RegionName) => servers[REGIONS.indexOf(region)]!;
let network: Network;
const clients: Redis[] = [];

function through(url: string): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 50, connectTimeout: 500 });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

async function reachable(client: Redis): Promise<boolean> {
  for (let i = 0; i < 40; i++) {
    try {
      await client.ping();
      return true;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return false;
}

async function cut(client: Redis): Promise<boolean> {
  for (let i = 0; i < 40; i++) {
    try {
      await client.ping();
      await new Promise((r) => setTimeout(r, 50));
    } catch {
      return true;
    }
  }
  return false;
}

describe('the lab network', () => {
  beforeAll(async () => {
    network = await startNetwork({
      root,
      redisPorts: Object.fromEntries(REGIONS.map((r) => [r, serverOf(r).port])) as Record<RegionName, number>,
    });
  }, 60_000);
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await network?.close();
  });

  it("routes each directed link to the destination region's Redis", async () => {
    expect(network.links()).toHaveLength(6);
    for (const { from, to } of network.links()) {
      const client = through(network.peerRedisUrl(from, to));
      await expect(reachable(client)).resolves.toBe(true);
      await client.set(`written-by-${from}`, to);
      const direct = new Redis(serverOf(to).url);
      expect(await direct.get(`written-by-${from}`)).toBe(to);
      direct.disconnect();
    }
  });

  it("a one-way cut stops only that region's outgoing links, and the heal restores them", async () => {
    const links = cutLinks({ kind: 'oneWay', region: 'eu-west', at: 0, until: 1 });
    expect(links).toEqual([
      { from: 'eu-west', to: 'us-east' },
      { from: 'eu-west', to: 'ap-south' },
    ]);
    const outgoing = through(network.peerRedisUrl('eu-west', 'us-east'));
    const incoming = through(network.peerRedisUrl('us-east', 'eu-west'));
    await expect(reachable(outgoing)).resolves.toBe(true);
    await Promise.all(links.map((link) => network.setEnabled(link, false)));
    await expect(cut(outgoing)).resolves.toBe(true);
    await expect(reachable(incoming)).resolves.toBe(true);
    await network.reset();
    await expect(reachable(outgoing)).resolves.toBe(true);
  });
});

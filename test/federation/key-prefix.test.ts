// redis.keyPrefix (issue 24): several quotafed deployments share one Redis, each under its own prefix. Two
// deployments on ONE redis-server with the same API key keep separate counts and separate keys; a two-region
// federation under `tenant-b` on two redis-servers keeps every key (state, shard markers, pending sets, meta,
// replay records, BullMQ queues) under the prefix; and a region under another prefix than its peer is told why
// gossip never merges (a /readyz warning naming the prefixes).
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { parseConfig } from '../../src/config/load.ts';
import { keyLayout } from '../../src/keys.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { client, useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, eventually } from '../service/fixtures.ts';

const SECRET = 'key-prefix-secret-0123456789';
const API_KEY = 'shared-api-key-7';
const HOUR = 3_600_000;

interface Deployment {
  region: string;
  redisUrl: string;
  keyPrefix?: string;
  limit: number;
  peer?: { name: string; redisUrl: string };
}

function configOf(d: Deployment) {
  return parseConfig({
    region: d.region,
    port: 0,
    logLevel: 'silent',
    redis: { url: d.redisUrl, commandTimeoutMs: 2_000, ...(d.keyPrefix ? { keyPrefix: d.keyPrefix } : {}) },
    ...(d.peer
      ? { federation: { syncIntervalMs: 50, leakageBudget: 0, secret: SECRET, peers: [{ name: d.peer.name, redisUrl: d.peer.redisUrl }] } }
      : {}),
    rules: [{ name: 'calls', by: ['apiKey'], algorithm: 'fixedWindow', limit: d.limit, period: '1h' }],
  });
}

const services: RegionService[] = [];
afterAll(async () => {
  await Promise.all(services.map((service) => service.close()));
});

async function start(d: Deployment): Promise<RegionService> {
  const service = await startRegionService(configOf(d), { dashboard: false, newFederation: true });
  services.push(service);
  return service;
}

async function stop(service: RegionService): Promise<void> {
  services.splice(services.indexOf(service), 1);
  await service.close();
}

async function check(service: RegionService): Promise<boolean> {
  const response = await fetch(`${service.url}/v1/check`, {
    method: 'POST',
    body: JSON.stringify({ apiKey: API_KEY, method: 'GET', path: '/x' }),
  });
  return ((await response.json()) as { allowed: boolean }).allowed;
}

async function admitted(service: RegionService, requests: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < requests; i++) if (await check(service)) count++;
  return count;
}

async function allKeys(redis: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1_000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys.sort();
}

const under = (prefix: string) => (key: string) => key.startsWith(`${prefix}:`) || key.startsWith(`{${prefix}}:`);

describe('two deployments on one redis-server', async () => {
  const shared = await useRedis();
  const admin = client(shared.url);

  it('each enforces its own limit for the same API key, its keys under its own prefix only', async () => {
    await awayFromWindowEdge(HOUR, 20_000);
    const plain = await start({ region: 'us-east', redisUrl: shared.url, limit: 3 });
    const tenant = await start({ region: 'us-east', redisUrl: shared.url, keyPrefix: 'tenant-b', limit: 5 });
    // Interleaved: a shared key would let the first deployment's 3 spend the second's 5.
    expect(await admitted(plain, 2)).toBe(2);
    expect(await admitted(tenant, 4)).toBe(4);
    expect(await admitted(plain, 4)).toBe(1);
    expect(await admitted(tenant, 4)).toBe(1);

    const keys = await allKeys(admin);
    const stateOf = (prefix: string) => keyLayout(prefix).ruleKey('calls', { principal: API_KEY, dimensions: [API_KEY] });
    expect(keys).toContain(stateOf('qf'));
    expect(keys).toContain(stateOf('tenant-b'));
    expect(keys.filter((key) => !under('qf')(key) && !under('tenant-b')(key))).toEqual([]);
    const tenantKeys = keys.filter(under('tenant-b'));
    const plainKeys = keys.filter(under('qf'));
    expect(tenantKeys.length).toBeGreaterThan(0);
    expect(plainKeys.length).toBeGreaterThan(0);
    // Every key holding this caller's state is one deployment's: none is shared.
    expect(tenantKeys.filter((key) => plainKeys.includes(key))).toEqual([]);
    await Promise.all([stop(plain), stop(tenant)]);
  });
});

describe('a two-region federation under tenant-b', async () => {
  const redisA = await useRedis();
  const redisB = await useRedis();
  const adminA = client(redisA.url);
  const adminB = client(redisB.url);
  const layout = keyLayout('tenant-b');
  const stateKey = layout.ruleKey('calls', { principal: API_KEY, dimensions: [API_KEY] });

  it('keeps state, markers, pending sets, meta, replay records and the BullMQ queues under the prefix', async () => {
    await awayFromWindowEdge(HOUR, 20_000);
    const a = await start({
      region: 'a',
      redisUrl: redisA.url,
      keyPrefix: 'tenant-b',
      limit: 50,
      peer: { name: 'b', redisUrl: redisB.url },
    });
    const b = await start({
      region: 'b',
      redisUrl: redisB.url,
      keyPrefix: 'tenant-b',
      limit: 50,
      peer: { name: 'a', redisUrl: redisA.url },
    });
    expect(await admitted(a, 10)).toBe(10);
    // b merges a's gossip into the same state key under its own (the same) prefix.
    await eventually(async () => (await adminB.exists(stateKey)) === 1, 10_000, "a's state on b's Redis");
    await eventually(async () => (await adminB.exists(layout.replayKey('a'))) === 1, 10_000, "b's replay record of a");

    // With b gone, a's next admission waits for b in a pending set.
    await stop(b);
    expect(await admitted(a, 1)).toBe(1);
    const [shard] = /\{s(\d+)\}/.exec(stateKey)!.slice(1).map(Number);
    const pending = await eventually(async () => {
      const sets = (await allKeys(adminA)).filter((key) => key.startsWith(`tenant-b:{s${shard}}:p:`));
      return sets.length > 0 && sets;
    });
    expect(await adminA.zscore(pending[0]!, stateKey)).not.toBeNull();

    for (const [name, admin] of [
      ['a', adminA],
      ['b', adminB],
    ] as const) {
      const keys = await allKeys(admin);
      expect(
        keys.filter((key) => !under('tenant-b')(key)),
        `keys of ${name}'s Redis outside the prefix`,
      ).toEqual([]);
      expect(keys).toContain(layout.metaKey);
      expect(keys).toContain(stateKey);
      expect(keys).toContain(layout.shardMarkerKey(shard!));
      expect(keys.some((key) => key.startsWith('{tenant-b}:gossip:'))).toBe(true);
      expect(await admin.hget(layout.metaKey, 'region')).toBe(name);
    }
    await stop(a);
  });

  it('a region under another prefix than its peer says so on /readyz, naming both prefixes', async () => {
    // b's meta (tenant-b:meta, region b) is still in b's Redis; this region a looks for its peer under `tenant-x`.
    const stray = await start({
      region: 'a',
      redisUrl: redisA.url,
      keyPrefix: 'tenant-x',
      limit: 50,
      peer: { name: 'b', redisUrl: redisB.url },
    });
    const warnings = await eventually(
      async () => {
        const body = (await (await fetch(`${stray.url}/readyz`)).json()) as { warnings?: string[] };
        return body.warnings?.find((line) => line.includes('redis.keyPrefix'));
      },
      15_000,
      'the key prefix warning',
    );
    expect(warnings).toContain('"tenant-b"');
    expect(warnings).toContain('"tenant-x"');
    expect(warnings).toContain('no tenant-x:meta');
    await stop(stray);
  });
});

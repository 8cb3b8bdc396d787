// What operators do to a running federation, against real redis-server processes and the real engine and
// start-up recovery: remove a region and restart the others with the new topology in the middle of a window,
// add a region to a running federation, and restart a region's Redis from an RDB snapshot that lacks its latest
// admissions while every marker survives. In each case the window's total stays within L + B: the region whose
// surviving state cannot be trusted for the current windows fences them.
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { recoverOnStart } from '../../src/federation/recovery.ts';
import { silentLogger } from '../../src/log.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { KEY_SHARDS, shardMarkerKey } from '../../src/keys.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { createRegionRedis, waitReady, type RegionRedis } from '../../src/store/client.ts';
import { startTestFederation } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';

const LIMIT = 99;
const PERIOD = 3_600_000;
// Every decision at one instant in the middle of an hour-long window: the windows are those of this clock.
const NOW = Math.floor(Date.now() / PERIOD) * PERIOD + PERIOD / 2;

const servers: RedisProcess[] = [];
const clients: RegionRedis[] = [];

async function redisServer(extraArgs: string[] = [], appendOnly = false): Promise<RedisProcess> {
  const server = await startRedis({ extraArgs, appendOnly });
  servers.push(server);
  return server;
}

/** A region's config in a federation of `regions` (name -> its Redis URL; an absent URL is a closed port). */
function regionConfig(region: string, regions: Record<string, string>, durable = false): Config {
  return parseConfig({
    region,
    redis: { url: regions[region]!, durable },
    federation: {
      syncIntervalMs: 100,
      leakageBudget: 0,
      peers: Object.entries(regions)
        .filter(([name]) => name !== region)
        .map(([name, redisUrl]) => ({ name, redisUrl })),
    },
    rules: [{ name: 'fw', match: { endpoints: ['/x'] }, by: ['apiKey'], algorithm: 'fixedWindow', limit: LIMIT, period: PERIOD }],
  });
}

/** Starts a region as its service would: start-up recovery first, then the engine. */
async function startRegion(config: Config, declaredNew = false) {
  const redis = createRegionRedis(config);
  clients.push(redis);
  await waitReady(redis, 2_000);
  const recovery = await recoverOnStart({
    config,
    topology: topologyOf(config),
    redis,
    logger: silentLogger(),
    declaredNew,
    timeoutMs: 300,
  });
  const engine = createRedisEngine({ config, redis, nowMs: () => NOW, overLimitCache: false });
  /** Decides up to `tries` requests of one caller; returns how many were admitted. */
  const admit = async (tries: number, apiKey = 'k'): Promise<number> => {
    let admitted = 0;
    for (let i = 0; i < tries; i++) {
      const decision = await engine.decide({ apiKey, ip: '203.0.113.1', method: 'GET', path: '/x' });
      if (decision.allowed) admitted++;
    }
    return admitted;
  };
  return { redis, recovery, admit };
}

const CLOSED = 'redis://127.0.0.1:1';

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.quit().catch(() => client.disconnect())));
});

afterAll(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

describe('membership changes in the middle of a window', () => {
  it('removing a region: the regions restarted with the new topology fence the window, so it admits at most L', async () => {
    const [eu, us] = [await redisServer(), await redisServer()];
    const three = { ap: CLOSED, eu: eu.url, us: us.url };
    const before = [await startRegion(regionConfig('eu', three), true), await startRegion(regionConfig('us', three), true)];
    const first = [await before[0]!.admit(50), await before[1]!.admit(50)];
    // Each region's share of L = 99 over three regions.
    expect(first).toEqual([33, 33]);
    await Promise.all(clients.splice(0).map((client) => client.quit()));

    // ap is removed; eu and us restart with a two-region topology, on the Redis that holds the window's counts.
    const two = { eu: eu.url, us: us.url };
    const after = [await startRegion(regionConfig('eu', two)), await startRegion(regionConfig('us', two))];
    for (const region of after) {
      expect(region.recovery.fenced).toBe(true);
      expect(region.recovery.reason).toMatch(/regions or weights changed/);
    }
    const second = [await after[0]!.admit(100), await after[1]!.admit(100)];
    // Without the fence the cells (addressed by region index) were read under the new layout: 132 in the window.
    expect(first[0]! + first[1]! + second[0]! + second[1]!).toBeLessThanOrEqual(LIMIT);
    expect(second).toEqual([0, 0]);
  });

  it('adding a region: a newcomer whose peers run under another topology fences its first window', async () => {
    const [eu, us, ap] = [await redisServer(), await redisServer(), await redisServer()];
    const two = { eu: eu.url, us: us.url };
    const running = [await startRegion(regionConfig('eu', two), true), await startRegion(regionConfig('us', two), true)];
    // The two shares of L = 99 (the remainder goes to one of them, rotating by window).
    expect((await running[0]!.admit(60)) + (await running[1]!.admit(60))).toBe(LIMIT);

    // ap joins with a three-region config while eu and us still run the old one: even declared new, it fences.
    const three = { ap: ap.url, eu: eu.url, us: us.url };
    const newcomer = await startRegion(regionConfig('ap', three), true);
    expect(newcomer.recovery.fenced).toBe(true);
    expect(newcomer.recovery.reason).toMatch(/another topology/);
    expect(await newcomer.admit(40)).toBe(0);
  });
});

describe('a rule redefined under its name across a restart', () => {
  it('another algorithm or period under the same name fences the current windows; the same rule does not', async () => {
    const [eu, us] = [await redisServer(), await redisServer()];
    const two = { eu: eu.url, us: us.url };
    const first = await startRegion(regionConfig('eu', two), true);
    const spent = await first.admit(100);
    expect(spent).toBeGreaterThan(0);
    await Promise.all(clients.splice(0).map((client) => client.quit()));

    // The same rules again: nothing to doubt.
    const same = await startRegion(regionConfig('eu', two));
    expect(same.recovery.fenced).toBe(false);
    await Promise.all(clients.splice(0).map((client) => client.quit()));

    // "fw" as a sliding window of two hours: its keys would be read under window ids of another period.
    const base = regionConfig('eu', two);
    const redefinedConfig = {
      ...base,
      rules: base.rules.map((rule) => ({ ...rule, algorithm: 'slidingWindow' as const, period: 2 * PERIOD })),
    };
    const after = await startRegion(redefinedConfig);
    expect(after.recovery.fenced).toBe(true);
    expect(after.recovery.reason).toMatch(
      /rules were redefined under the same name .*"fw" \(fixedWindow\/3600000 -> slidingWindow\/7200000\)/,
    );
    // The fence covers the window in which the change happened: nothing more is admitted in it.
    expect(await after.admit(100)).toBe(0);
  });
});

describe('a Redis restarted from a snapshot keeps its markers but not its latest admissions', () => {
  /** 10 admitted, `persisted` (a snapshot, or nothing), 20 more, SIGKILL, restart, the region started again. */
  async function restartAfter(own: RedisProcess, durable: boolean, persisted: (redis: RegionRedis) => Promise<void>) {
    const regions = { eu: own.url, us: CLOSED };
    const region = await startRegion(regionConfig('eu', regions, durable), true);
    expect(await region.admit(10)).toBe(10);
    await persisted(region.redis);
    expect(await region.admit(20)).toBe(20);
    await Promise.all(clients.splice(0).map((client) => client.quit()));
    await own.kill('SIGKILL');
    await own.restart();
    return startRegion(regionConfig('eu', regions, durable));
  }

  it('a new run_id fences the current windows: the region admits nothing more of its spent share', async () => {
    // The snapshot (Redis's default persistence is RDB): 10 admitted, every marker, the start-up record.
    const restarted = await restartAfter(await redisServer(), false, async (redis) => void (await redis.save()));
    expect(restarted.recovery.fenced).toBe(true);
    expect(restarted.recovery.reason).toMatch(/run_id/);
    // Its share is 49 or 50 (L = 99 over two regions); 30 were admitted, 20 of them after the snapshot.
    expect(await restarted.admit(40)).toBe(0);
  });

  it("Redis's own save schedule (save 2 1): the restart from its last snapshot fences", async () => {
    const own = await redisServer(['--save', '2 1']);
    const restarted = await restartAfter(own, false, async (redis) => {
      // Redis saves on its own within about 2 s of the first change.
      await eventually(async () => /rdb_changes_since_last_save:0\b/.test(await (redis as Redis).info('persistence')), 10_000);
    });
    expect(restarted.recovery.fenced).toBe(true);
    expect(await restarted.admit(40)).toBe(0);
  });

  it('AOF with appendfsync everysec fences, and redis.durable over it is not believed', async () => {
    const everysec = () => redisServer(['--appendfsync', 'everysec'], true);
    const plain = await restartAfter(await everysec(), false, async () => undefined);
    expect(plain.recovery.fenced).toBe(true);
    const declared = await restartAfter(await everysec(), true, async () => undefined);
    expect(declared.recovery.fenced).toBe(true);
    expect(declared.recovery.reason).toMatch(/redis\.durable is set, but this Redis runs appendonly yes, appendfsync everysec/);
    expect(await declared.admit(40)).toBe(0);
  });

  it('redis.durable over AOF with appendfsync always is believed: no fence, and nothing was lost', async () => {
    const restarted = await restartAfter(await redisServer([], true), true, async () => undefined);
    expect(restarted.recovery.fenced).toBe(false);
    // The 30 admitted came back with the AOF: the share (49 or 50) has 19 or 20 left.
    const left = await restarted.admit(40);
    expect(left).toBeGreaterThanOrEqual(19);
    expect(left).toBeLessThanOrEqual(20);
  });
});

describe('a Redis restarted from a snapshot under a running federation', () => {
  it('the next round after the reconnect sees the new run_id and fences the current windows', async () => {
    const fed = await startTestFederation({
      names: ['a', 'b'],
      syncIntervalMs: 50,
      rules: [{ name: 'fw', match: { endpoints: ['/x'] }, by: ['apiKey'], algorithm: 'fixedWindow', limit: LIMIT, period: PERIOD }],
      leakageBudget: 0,
    });
    try {
      const a = fed.region('a');
      const decide = () => a.engine.decide({ apiKey: 'snap', ip: '203.0.113.1', method: 'GET', path: '/x' });
      for (let i = 0; i < 5; i++) expect((await decide()).allowed).toBe(true);
      await a.redis.save();
      for (let i = 0; i < 10; i++) await decide();
      await a.server.kill('SIGKILL');
      await a.server.restart();
      // The markers came back with the snapshot; the federation's recheck after the reconnect fences them.
      await eventually(
        async () => {
          const fences = await Promise.all(
            Array.from({ length: KEY_SHARDS }, (_, shard) => a.redis.hget(shardMarkerKey(shard), 'fence').catch(() => null)),
          );
          return fences.every((fence) => Number(fence) > 0);
        },
        10_000,
        'every shard fenced',
      );
      // The window that held the lost admissions admits nothing more in this region.
      await eventually(async () => !(await decide()).allowed, 5_000, 'a denial');
    } finally {
      await fed.close();
    }
  });
});

// The decision engine and the federation on a real Redis Cluster (three primaries, three replicas, joined with
// redis-cli): the seed's policies, a request spanning two slots, exact admissions under concurrency, a
// federation where one region is a cluster, and the failover of the primary that owns a hot key's slot.
import { readFileSync } from 'node:fs';
import { Redis, type Cluster } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseConfig } from '../../src/config/load.ts';
import type { Config, ConfigInput } from '../../src/config/schema.ts';
import { StoreUnavailableError } from '../../src/engine/errors.ts';
import { createRegionRedis, waitReady, type RegionRedis } from '../../src/store/client.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import type { Decision, DecisionEngine, RequestContext } from '../../src/engine/types.ts';
import { federationKeyView } from '../../src/federation/admin-view.ts';
import { startFederation, type Federation } from '../../src/federation/index.ts';
import { askPeer } from '../../src/federation/recovery.ts';
import { REPORT_STEP } from '../../src/protocol/index.ts';
import { markAllPending } from '../../src/federation/resync.ts';
import { eventually } from '../support/wait.ts';
import { GOSSIP_QUEUE_PREFIX, KEY_SHARDS, META_KEY, ruleKey, shardOf } from '../../src/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';

/** The seed's worked policies, as the local federation ships them. */
const SEED_RULES = (parse(readFileSync('regions/us-east.yaml', 'utf8')) as { rules: ConfigInput['rules'] }).rules;
/** Pinned decision clock: token buckets do not refill and windows do not roll, so counts are exact. */
const NOW = Date.UTC(2026, 0, 1, 12, 0, 30);

let cluster: RedisCluster;
/** Cluster slot owner (primary port) of each of the 64 shards, as at the start. */
let ownerOfShard: Map<number, number>;
const clients: RegionRedis[] = [];

function clusterConfig(extra: Partial<ConfigInput> = {}, redis: Partial<NonNullable<ConfigInput['redis']>> = {}): Config {
  return parseConfig({
    region: 'solo',
    rules: SEED_RULES,
    ...extra,
    redis: { clusterNodes: [...cluster.seedUrls], commandTimeoutMs: 2_000, ...redis },
  });
}

async function connect(config: Config): Promise<RegionRedis> {
  const redis = createRegionRedis(config);
  redis.on('error', () => undefined);
  clients.push(redis);
  await waitReady(redis);
  return redis;
}

async function engineOn(config: Config): Promise<DecisionEngine> {
  return createRedisEngine({ config, redis: await connect(config), overLimitCache: false, nowMs: () => NOW });
}

/** An API key (or IP) whose shard is served by `port`, distinct from the ones in `avoid`. */
function principalOn(port: number, prefix: string, avoid: ReadonlySet<number> = new Set()): string {
  for (let i = 0; i < 10_000; i++) {
    const candidate = `${prefix}-${i}`;
    const shard = shardOf(candidate);
    if (ownerOfShard.get(shard) === port && !avoid.has(shard)) return candidate;
  }
  throw new Error(`no principal found on port ${port}`);
}

const get = (apiKey: string | undefined, path = '/items', ip = '10.0.0.1'): RequestContext => ({ apiKey, ip, method: 'GET', path });

async function sequentially(engine: DecisionEngine, request: RequestContext, count: number): Promise<Decision[]> {
  const decisions: Decision[] = [];
  for (let i = 0; i < count; i++) decisions.push(await engine.decide(request));
  return decisions;
}

const allowedCount = (decisions: readonly Decision[]) => decisions.filter((d) => d.allowed).length;
const remainingOf = (decision: Decision, rule: string) => decision.outcomes.find((o) => o.rule === rule)!.remaining;
const primaries = () => [...new Set(ownerOfShard.values())].sort((a, b) => a - b);

beforeAll(async () => {
  cluster = await startRedisCluster();
  const probe = await connect(clusterConfig());
  const slots = (await probe.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
  ownerOfShard = new Map();
  for (let shard = 0; shard < KEY_SHARDS; shard++) {
    const slot = Number(await probe.call('CLUSTER', 'KEYSLOT', `qf:{s${shard}}:m`));
    ownerOfShard.set(shard, Number(slots.find(([start, end]) => slot >= start && slot <= end)![2][1]));
  }
});

afterAll(async () => {
  await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())));
  await cluster?.stop();
});

describe('decision engine on a three-primary cluster', () => {
  it('decides the seed policies exactly, with callers spread over every primary', async () => {
    expect(primaries()).toHaveLength(3);
    const engine = await engineOn(clusterConfig());
    const [first, second, third] = primaries() as [number, number, number];

    // Per API key: a 1,000-token bucket (pinned clock: no refill during the test).
    const bulk = principalOn(first, 'bulk');
    const burst = await Promise.all(Array.from({ length: 1_000 }, () => engine.decide(get(bulk))));
    expect(allowedCount(burst)).toBe(1_000);
    const over = await engine.decide(get(bulk));
    expect(over.allowed).toBe(false);
    expect(over.binding).toMatchObject({ rule: 'per-key', allowed: false, source: 'redis' });
    expect(over.binding!.retryAfterMs).toBeGreaterThan(0);

    // /search is 100 per key and endpoint; the denied 101st consumes nothing of the key's bucket.
    const searcher = principalOn(second, 'search');
    const searches = await sequentially(engine, get(searcher, '/search'), 101);
    expect(allowedCount(searches)).toBe(100);
    expect(searches[100]!.binding).toMatchObject({ rule: 'search', allowed: false });
    // /checkout is 10 per key and endpoint, on the same key: its own budget, the bucket shared.
    const checkouts = await sequentially(engine, get(searcher, '/checkout'), 11);
    expect(allowedCount(checkouts)).toBe(10);
    expect(checkouts[10]!.binding).toMatchObject({ rule: 'checkout', allowed: false });
    const after = await engine.decide(get(searcher));
    expect(remainingOf(after, 'per-key')).toBe(1_000 - 100 - 10 - 1);

    // Another key on the third primary is untouched by all of that.
    const other = principalOn(third, 'other');
    expect(remainingOf(await engine.decide(get(other, '/search')), 'search')).toBe(99);
    expect(new Set([bulk, searcher, other].map((key) => ownerOfShard.get(shardOf(key)))).size).toBe(3);
  });

  it('keeps "a denial consumes nothing" for a request whose rules live in two slots (refund)', async () => {
    // An IP rule next to the per-key bucket: the API key and the client IP hash to shards on different primaries.
    const rules: ConfigInput['rules'] = [
      SEED_RULES[0]!,
      { name: 'per-ip', match: { identity: 'any' }, by: ['ip'], algorithm: 'fixedWindow', limit: 5, period: '1m', failMode: 'closed' },
    ];
    const engine = await engineOn(clusterConfig({ rules }));
    const [first, second] = primaries() as [number, number, number];
    const apiKey = principalOn(first, 'spanning');
    const ip = principalOn(second, '10.9.0');
    expect(ownerOfShard.get(shardOf(apiKey))).not.toBe(ownerOfShard.get(shardOf(ip)));

    // Twelve at once: the IP rule admits five; the seven it denies were taken from the bucket and given back.
    const decisions = await Promise.all(Array.from({ length: 12 }, () => engine.decide(get(apiKey, '/items', ip))));
    expect(allowedCount(decisions)).toBe(5);
    for (const denied of decisions.filter((d) => !d.allowed)) expect(denied.binding).toMatchObject({ rule: 'per-ip', allowed: false });
    const probe = await engine.decide(get(apiKey, '/items', '192.0.2.1'));
    expect(remainingOf(probe, 'per-key')).toBe(1_000 - 5 - 1);
  });

  it('admits exactly the limit for one key under concurrency from three clients', async () => {
    const engines = await Promise.all([1, 2, 3].map(() => engineOn(clusterConfig())));
    const key = principalOn(primaries()[1]!, 'contended');
    const decisions = await Promise.all(Array.from({ length: 1_200 }, (_, i) => engines[i % 3]!.decide(get(key))));
    expect(allowedCount(decisions)).toBe(1_000);
    const checkoutKey = principalOn(primaries()[2]!, 'contended-checkout');
    const checkouts = await Promise.all(Array.from({ length: 60 }, (_, i) => engines[i % 3]!.decide(get(checkoutKey, '/checkout'))));
    expect(allowedCount(checkouts)).toBe(10);
  });
});

describe('federation with a cluster region', () => {
  let west: RedisProcess;
  let westRedis: Redis | undefined;
  const federations: Federation[] = [];
  afterAll(async () => {
    await Promise.all(federations.map((federation) => federation.close()));
    await westRedis?.quit().catch(() => westRedis?.disconnect());
    await west?.stop();
  });

  it('gossips both ways between a cluster region and a single-Redis region', async () => {
    west = await startRedis();
    // The peer's status address is a node that does not own qf:meta: asking that node alone would get MOVED.
    const metaOwner = await cluster.primaryPortFor(META_KEY);
    const eastUrl = cluster.nodes.find((node) => node.port !== metaOwner)!.url;
    const rules: ConfigInput['rules'] = [{ name: 'fed-fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000, period: '1h' }];
    const LOUD = 480;
    const federation = { syncIntervalMs: 50, maxClockSkewMs: 200, secret: 'cluster-federation-secret-0123' };
    const eastConfig = clusterConfig({
      region: 'east',
      rules,
      federation: { ...federation, peers: [{ name: 'west', redisUrl: west.url }] },
    });
    const westConfig = parseConfig({
      region: 'west',
      redis: { url: west.url, commandTimeoutMs: 2_000 },
      rules,
      federation: { ...federation, peers: [{ name: 'east', redisUrl: eastUrl, clusterNodes: [...cluster.seedUrls] }] },
    });
    const eastRedis = await connect(eastConfig);
    westRedis = new Redis(west.url, { maxRetriesPerRequest: 1 });
    westRedis.on('error', () => undefined);
    const east = {
      config: eastConfig,
      redis: eastRedis,
      engine: createRedisEngine({ config: eastConfig, redis: eastRedis, overLimitCache: false }),
    };
    const westRegion = {
      config: westConfig,
      redis: westRedis,
      engine: createRedisEngine({ config: westConfig, redis: westRedis, overLimitCache: false }),
    };
    const eastFederation = await startFederation({
      config: eastConfig,
      redis: eastRedis,
      registry: new Registry(),
      logger: silentLogger(),
      newFederation: true,
    });
    federations.push(eastFederation);
    const westFederation = await startFederation({
      config: westConfig,
      redis: westRedis,
      registry: new Registry(),
      logger: silentLogger(),
      newFederation: true,
    });
    federations.push(westFederation);
    // West asked the cluster whether it had heard of west: a fresh region, not a "lost data" fence.
    expect(westFederation.recovery).toMatchObject({ fenced: false, answers: { east: 'never' } });
    expect(eastFederation.recovery).toMatchObject({ fenced: false, answers: { west: 'never' } });

    // Keys on every primary of the cluster region.
    const keys = primaries().map((port, i) => principalOn(port, `fed-${i}`));
    // Each key's first admission crosses the watermark of its region's share (525 of 1,000 + 50), so the keys are
    // loud and every admission is gossiped (a key far below its share stays silent: admission-gossip.ts).
    const admit = (engine: typeof east.engine, key: string, cost: number) => engine.decide({ ...get(key), cost });
    for (const key of keys) for (let i = 0; i < 3; i++) expect((await admit(east.engine, key, i === 0 ? LOUD : 1)).allowed).toBe(true);
    const westKey = principalOn(primaries()[0]!, 'fed-west');
    for (let i = 0; i < 4; i++) expect((await admit(westRegion.engine, westKey, i === 0 ? LOUD : 1)).allowed).toBe(true);

    // A loud key's count reaches the peer at each report step (2% of the region's allowance, at most L + B = 1,050
    // here: docs/federation.md §2), so the peer's view is within a step of the count.
    const step = Math.max(1, Math.floor(REPORT_STEP * 1_050));
    const seen = async (region: typeof east, key: string, from: string, count: number) =>
      eventually(
        async () => {
          const view = await federationKeyView(region.config, region.redis, 'fed-fw', { apiKey: key });
          const seenCount = view.windows.find((w) => w.current)?.consumption[from] ?? 0;
          return seenCount <= count && seenCount > count - step ? true : undefined;
        },
        10_000,
        `${region.config.region} to see ${count} of ${from} for ${key}`,
      );
    for (const key of keys) await seen(westRegion, key, 'east', LOUD + 2);
    await seen(east, westKey, 'west', LOUD + 3);

    // The inbound queue on the cluster lives in one slot under {qf}.
    const queueSlots = new Set<unknown>();
    for (const node of (eastRedis as Cluster).nodes('master')) {
      for (const key of await node.keys(`${GOSSIP_QUEUE_PREFIX}:gossip:*`)) queueSlots.add(await node.call('CLUSTER', 'KEYSLOT', key));
    }
    expect(queueSlots.size).toBe(1);

    // A resync served from the cluster finds the keys on every primary.
    expect(await markAllPending(eastRedis, eastConfig, 1)).toBe(keys.length + 1);
    // Recovery asks a cluster peer through a cluster connection (qf:meta is on one primary only).
    expect(await askPeer({ redisUrl: eastUrl, clusterNodes: [...cluster.seedUrls] }, 'west', 1_000)).toBe('heard');
    expect(await askPeer(eastUrl, 'west', 1_000)).toBe('unreachable');
  });
});

describe('failover of the primary that owns a hot key', () => {
  it('fails fast during the failover and continues from the replicated counter after the promotion', async () => {
    const config = clusterConfig(
      { breaker: { failureThreshold: 3, probeIntervalMs: 200, successThreshold: 1, localFallback: false } },
      { commandTimeoutMs: 200 },
    );
    const redis = await connect(config);
    const inner = createRedisEngine({ config, redis, overLimitCache: false, nowMs: () => NOW });
    const resilient = createResilientEngine({ config, inner, probe: () => redis.ping(), logger: silentLogger() });
    const hot = principalOn(primaries()[0]!, 'hot');
    const cold = principalOn(primaries()[1]!, 'cold');
    let coldFailures = 0;
    const hotPrimary = await cluster.primaryPortFor(ruleKey('per-key', { principal: hot, dimensions: [hot] }));
    expect(hotPrimary).toBe(primaries()[0]);

    // 100 admissions, confirmed on the replica (WAIT): these must survive the failover.
    expect(allowedCount(await sequentially(inner, get(hot), 100))).toBe(100);
    const direct = new Redis({ host: '127.0.0.1', port: hotPrimary, maxRetriesPerRequest: 0 });
    expect(await direct.call('WAIT', '1', '5000')).toBe(1);
    direct.disconnect();

    // Traffic on the hot key through the resilient engine (every decision answers) and the bare engine (errors).
    const phase = { promoted: false };
    const counted = { beforePromotion: 100, afterPromotion: 0 };
    const failures: { ms: number; error: unknown }[] = [];
    const degraded: { ms: number; source: string }[] = [];
    const traffic = (async () => {
      const deadline = Date.now() + 25_000;
      for (let i = 0; i < 5_000 && Date.now() < deadline; i++) {
        if (phase.promoted && counted.afterPromotion >= 20) return;
        const started = performance.now();
        const decision = await resilient.decide(get(hot));
        const source = decision.binding!.source;
        if (source === 'redis') {
          if (phase.promoted) counted.afterPromotion++;
          else counted.beforePromotion++;
        } else {
          degraded.push({ ms: performance.now() - started, source });
        }
        const bare = performance.now();
        await inner.decide(get(hot, '/other', '10.0.0.2')).then(
          () => {
            if (phase.promoted) counted.afterPromotion++;
            else counted.beforePromotion++;
          },
          (error: unknown) => failures.push({ ms: performance.now() - bare, error }),
        );
        // A key on another primary: with the default cluster-require-full-coverage, it fails too while the
        // cluster state is "fail" (between the failure detection and the promotion).
        await inner.decide(get(cold)).then(
          () => undefined,
          () => coldFailures++,
        );
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();

    await new Promise((resolve) => setTimeout(resolve, 300));
    const result = await cluster.failover(hotPrimary);
    phase.promoted = true;
    await traffic;
    await resilient.close();

    expect(result.promotedPort).not.toBe(hotPrimary);
    expect(counted.afterPromotion).toBeGreaterThanOrEqual(20);
    // During the failover: the bare engine reported the store unavailable, and the resilient engine answered
    // by the rule's fail mode (per-key fails open).
    // Bounds, not performance: a bare decision gives up after at most 6 attempts of (100 ms retry delay +
    // 200 ms command timeout); the resilient engine answers by its deadline (2 x 200 + 25 ms). Both with slack.
    expect(failures.length).toBeGreaterThan(0);
    for (const failure of failures) {
      expect(failure.error).toBeInstanceOf(StoreUnavailableError);
      expect(failure.ms).toBeLessThan(3_000);
    }
    expect(degraded.length).toBeGreaterThan(0);
    expect(new Set(degraded.map((d) => d.source))).toEqual(new Set(['fail-open']));
    for (const answer of degraded) expect(answer.ms).toBeLessThan(1_500);

    // The counter continues from what the replica had: at least the WAIT-confirmed 100, at most every
    // admission Redis counted before the promotion was seen (those after the last replication are lost with
    // the primary), plus what was counted after it and this last probe.
    const final = await inner.decide(get(hot));
    const consumed = 1_000 - remainingOf(final, 'per-key');
    const replicated = consumed - counted.afterPromotion - 1;
    console.info(
      `failover: ${result.elapsedMs} ms to promotion; counted before the promotion ${counted.beforePromotion}, kept ${replicated}; ` +
        `bare-engine errors ${failures.length} (max ${Math.max(...failures.map((f) => f.ms)).toFixed(0)} ms); ` +
        `degraded answers ${degraded.length} (max ${Math.max(...degraded.map((d) => d.ms)).toFixed(0)} ms); ` +
        `cold-key failures ${coldFailures}`,
    );
    expect(replicated).toBeGreaterThanOrEqual(100);
    // A decision the caller stopped waiting for (a degraded answer, or an error after a timeout) may still have
    // been applied: it can only add consumption, never lose any.
    expect(replicated).toBeLessThanOrEqual(counted.beforePromotion + degraded.length + failures.length);
  });
});

// The dashboard source against real redis-servers: a region's key views come from its Redis state exactly as
// the decision script wrote it, links go down when a peer's Redis dies and up when it returns, and the
// metrics reader turns counters into rates.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Config } from '../../src/config/schema.ts';
import { AnnotationInput, createAnnotationStore } from '../../src/dashboard/annotations.ts';
import { createMetricsReader } from '../../src/dashboard/metrics-reader.ts';
import { createDashboardSource, type ClosableDashboardSource } from '../../src/dashboard/source.ts';
import type { DashboardSnapshot } from '../../src/dashboard/types.ts';
import { createRegionRedis, waitReady, type RegionRedis } from '../../src/store/client.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { matchRules } from '../../src/engine/rules.ts';
import { KEY_SHARDS, shardMarkerKey } from '../../src/keys.ts';
import { client, useRedis, type RedisProcess } from '../harness/redis.ts';

describe('metrics reader', () => {
  it('reports 429s and decisions per endpoint as rates between readings, and the breaker state', async () => {
    const registry = new Registry();
    const rejections = new Counter({ name: 'quotafed_http_429_total', help: 'x', labelNames: ['endpoint'], registers: [registry] });
    const decisions = new Counter({
      name: 'quotafed_decisions_total',
      help: 'x',
      labelNames: ['rule', 'endpoint', 'outcome', 'source'],
      registers: [registry],
    });
    const breaker = new Gauge({ name: 'quotafed_breaker_state', help: 'x', labelNames: ['region'], registers: [registry] });
    let now = 10_000;
    const reader = createMetricsReader(registry, 'us-east', () => now);
    breaker.set({ region: 'us-east' }, 0);
    breaker.set({ region: 'eu-west' }, 1);
    rejections.inc({ endpoint: '/search' }, 5);

    const first = await reader.read();
    expect(first.endpoints).toEqual([{ endpoint: '/search', rejectedPerSec: 0, rejectedTotal: 5, decisionsPerSec: 0 }]);
    expect(first.breaker.state).toBe('closed');

    now += 2_000;
    rejections.inc({ endpoint: '/search' }, 10);
    decisions.inc({ rule: 'a', endpoint: '/search', outcome: 'allowed', source: 'redis' }, 30);
    decisions.inc({ rule: 'b', endpoint: '/search', outcome: 'limited', source: 'redis' }, 10);
    breaker.set({ region: 'us-east' }, 1);
    const second = await reader.read();
    expect(second.endpoints).toEqual([{ endpoint: '/search', rejectedPerSec: 5, rejectedTotal: 15, decisionsPerSec: 20 }]);
    expect(second.breaker.state).toBe('open');
    expect(second.falseDenials).toEqual(new Map());

    const falseDenials = new Counter({
      name: 'quotafed_federation_false_denials_total',
      help: 'x',
      labelNames: ['rule'],
      registers: [registry],
    });
    falseDenials.inc({ rule: 'a' }, 3);
    expect((await reader.read()).falseDenials).toEqual(new Map([['a', 3]]));
  });
});

// Started at the top level so the harness's afterAll stops them with the file.
const servers: RedisProcess[] = await Promise.all([useRedis(), useRedis(), useRedis()]);
const plain = client(servers[0]!.url);

describe('dashboard source on real Redis', () => {
  let redis: RegionRedis;
  let source: ClosableDashboardSource;
  let config: Config;

  beforeAll(async () => {
    const [own, eu, ap] = servers as [RedisProcess, RedisProcess, RedisProcess];
    config = Config.parse({
      region: 'us-east',
      redis: { url: own.url, commandTimeoutMs: 500 },
      federation: {
        leakageBudget: '5%',
        peers: [
          { name: 'eu-west', redisUrl: eu.url },
          { name: 'ap-south', redisUrl: ap.url },
        ],
      },
      rules: [{ name: 'hot', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 300, period: 600_000 }],
    });
    // New servers have lost nothing: without markers the first window would be fenced off as after a data loss.
    redis = createRegionRedis(config);
    await waitReady(redis);
    await Promise.all(Array.from({ length: KEY_SHARDS }, (_, shard) => redis.hset(shardMarkerKey(shard), 'fence', 0)));
    source = createDashboardSource({
      config,
      registry: new Registry(),
      annotations: createAnnotationStore(),
      redis,
      watch: [{ rule: 'hot', apiKey: 'k1', label: 'k1' }],
      minIntervalMs: 0,
    });
  });

  afterAll(async () => {
    await source?.close();
    await redis?.quit();
  });

  it('shows the watched key as the decision script stored it: own, peers, global, allowance', async () => {
    const engine = createRedisEngine({ config, redis, overLimitCache: false });
    let admitted = 0;
    for (let i = 0; i < 10; i++)
      if ((await engine.decide({ apiKey: 'k1', ip: '127.0.0.1', method: 'GET', path: '/' })).allowed) admitted += 1;
    expect(admitted).toBe(10);

    // What gossip from ap-south (index 0) would have written: its consumption in this window.
    const stateKey = matchRules(config, { apiKey: 'k1', ip: '127.0.0.1', method: 'GET', path: '/' })[0]!.key;
    const windowId = Math.floor(Date.now() / 600_000);
    const slot = windowId % 3;
    expect(await plain.hget(stateKey, `w${slot}`)).toBe(String(windowId));
    await plain.hset(stateKey, `c${slot}.0`, 5);

    const snapshot: DashboardSnapshot = await source.snapshot();
    const [key] = snapshot.keys;
    expect(key).toMatchObject({ label: 'k1', rule: 'hot', limit: 300, budget: 15, own: 10, global: 15, acknowledged: 0 });
    expect(key!.views).toEqual([
      { region: 'ap-south', consumed: 5 },
      { region: 'eu-west', consumed: 0 },
      { region: 'us-east', consumed: 10 },
    ]);
    // (300 + 15)/3 = 105: the window bases add up to exactly L + B (docs/federation.md §2).
    expect(key!.allowance).toBe(105);
    expect(snapshot.regions.map((r) => [r.name, r.self])).toEqual([
      ['ap-south', false],
      ['eu-west', false],
      ['us-east', true],
    ]);
    // Nothing drains the pending sets here (no gossip workers): the changed key waits for both peers.
    expect(snapshot.links.map((l) => [l.to, l.state, l.backlog])).toEqual([
      ['eu-west', 'up', 1],
      ['ap-south', 'up', 1],
    ]);
    await engine.close();
  });

  it('adds the keys a chaos run asks to watch, shown by label only', async () => {
    const annotations = createAnnotationStore();
    const watching = createDashboardSource({ config, registry: new Registry(), annotations, redis, probePeers: false, minIntervalMs: 0 });
    try {
      expect((await watching.snapshot()).keys).toEqual([]);
      annotations.apply(AnnotationInput.parse({ watch: [{ rule: 'hot', apiKey: 'k1', label: 'chaos hot key' }] }));
      const snapshot = await watching.snapshot();
      expect(snapshot.keys.map((k) => [k.label, k.own])).toEqual([['chaos hot key', 10]]);
      expect(JSON.stringify(snapshot)).not.toContain('"k1"');
    } finally {
      await watching.close();
    }
  });

  it('shows a link down while the peer Redis is dead and up again after it restarts', async () => {
    await servers[2]!.kill();
    let snapshot = await source.snapshot();
    for (let i = 0; i < 20 && snapshot.links.find((l) => l.to === 'ap-south')?.state !== 'down'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      snapshot = await source.snapshot();
    }
    const down = snapshot.links.find((l) => l.to === 'ap-south')!;
    expect(down.state).toBe('down');
    expect(down.detail).toMatch(/ap-south Redis/);
    expect(snapshot.links.find((l) => l.to === 'eu-west')!.state).toBe('up');

    await servers[2]!.restart();
    for (let i = 0; i < 40 && snapshot.links.find((l) => l.to === 'ap-south')?.state !== 'up'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      snapshot = await source.snapshot();
    }
    expect(snapshot.links.find((l) => l.to === 'ap-south')!.state).toBe('up');
  });

  it('takes link state, backlog and sync lag from the federation: a silent peer is down even if its Redis answers', async () => {
    let heard = Date.now();
    const registry = new Registry();
    const lag = new Histogram({
      name: 'quotafed_federation_sync_lag_seconds',
      help: 'x',
      labelNames: ['region', 'peer'],
      registers: [registry],
    });
    const withFederation = createDashboardSource({
      config,
      registry,
      annotations: createAnnotationStore(),
      redis,
      federation: {
        status: () => [
          { name: 'eu-west', linkUp: true, lastHeardAt: heard, lastError: null, backlog: 3 },
          { name: 'ap-south', linkUp: true, lastHeardAt: Date.now() - 60_000, lastError: null, backlog: 9 },
        ],
      },
      minIntervalMs: 0,
    });
    try {
      await withFederation.snapshot();
      lag.observe({ region: 'us-east', peer: 'eu-west' }, 0.1);
      lag.observe({ region: 'us-east', peer: 'eu-west' }, 0.2);
      // Another region's series in the same process must not leak into this one.
      lag.observe({ region: 'eu-west', peer: 'us-east' }, 9);
      heard = Date.now();
      const snapshot = await withFederation.snapshot();
      const euWest = snapshot.links.find((l) => l.to === 'eu-west')!;
      expect(euWest).toMatchObject({ state: 'up', backlog: 3 });
      expect(euWest.syncLagMs).toBeCloseTo(150, 6);
      expect(snapshot.links.find((l) => l.to === 'ap-south')).toMatchObject({ state: 'down', backlog: 9, syncLagMs: null });
      expect(snapshot.links.find((l) => l.to === 'ap-south')!.detail).toMatch(/nothing heard for 60 s/);
    } finally {
      await withFederation.close();
    }
  });
});

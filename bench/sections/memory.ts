// 4. Memory: bytes per key in Redis for N active keys (one decision each), per algorithm, in one region and
// with the federation state of three regions; plus the token-bucket layouts we could move to (proposal).
import { markShardsIntact } from '../../src/federation/recovery.ts';
import type { Redis } from 'ioredis';
import { topologyOf } from '../../src/protocol/index.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import { withScripts } from '../../src/store/commands.ts';
import type { Config, ConfigInput } from '../../src/config/schema.ts';
import { applyGossipCall, runApplyGossip } from '../../src/store/gossip-calls.ts';
import { layoutOf } from '../../src/keys.ts';
import { flattenSlot } from '../../src/federation/gossip/cells.ts';
import { apiKeyRequest, benchConfig, type BenchContext, type RuleInput, type Section } from '../lib/context.ts';
import { runCountOrThrow } from '../lib/load.ts';
import { progress } from '../lib/progress.ts';
import { usedMemory } from '../lib/redis-stats.ts';
import { round } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';

type AlgorithmName = NonNullable<RuleInput['algorithm']>;

// The seed's policy shape: 1,000 per period per API key (10 in-flight slots for concurrency).
const RULES: Record<AlgorithmName, RuleInput> = {
  // A bucket's TTL is its time to refill to full: per day, so the keys outlive the measurement.
  tokenBucket: { name: 'per-key', by: ['apiKey'], algorithm: 'tokenBucket', limit: 1000, period: '1d' },
  fixedWindow: { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1000, period: '1m' },
  slidingWindow: { name: 'per-key', by: ['apiKey'], algorithm: 'slidingWindow', limit: 1000, period: '1m' },
  slidingLog: { name: 'per-key', by: ['apiKey'], algorithm: 'slidingLog', limit: 1000, period: '1m' },
  concurrency: { name: 'per-key', by: ['apiKey'], algorithm: 'concurrency', limit: 10, period: '1m' },
};

export const THREE_REGIONS: Partial<ConfigInput> = {
  region: 'us-east',
  federation: {
    leakageBudget: '5%',
    peers: [
      { name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' },
      { name: 'ap-south', redisUrl: 'redis://127.0.0.1:2' },
    ],
  },
};

async function stateKeys(admin: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 5_000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

async function sampledUsage(admin: Redis, keys: readonly string[], samples: number): Promise<number> {
  const step = Math.max(1, Math.floor(keys.length / samples));
  const pipeline = admin.pipeline();
  let count = 0;
  for (let i = 0; i < keys.length && count < samples; i += step, count++) pipeline.memory('USAGE', keys[i]!, 'SAMPLES', '0');
  const replies = (await pipeline.exec()) ?? [];
  const sizes = replies.map(([, value]) => Number(value));
  return sizes.reduce((sum, size) => sum + size, 0) / Math.max(1, sizes.length);
}

async function populate(ctx: BenchContext, config: Config, count: number, label: string): Promise<void> {
  const redis = createRegionRedis(config);
  await waitReady(redis);
  // A region that has been serving has its shard markers (fence 0). Without them the first decision of each
  // shard would read as data loss and fence the current window, denying (and writing) nothing.
  if (topologyOf(config).regions.length > 1) {
    await markShardsIntact(ctx.admin);
  }
  const engine = createRedisEngine({ config, redis, overLimitCache: false });
  await runCountOrThrow(
    `memory: ${label}`,
    (i) => engine.decide(apiKeyRequest(`mem-${i}`)),
    count,
    256,
    (done) => progress(`memory: ${label}: ${done.toLocaleString('en-US')} / ${count.toLocaleString('en-US')} keys`),
  );
  await engine.close();
  await redis.quit();
}

/**
 * Applies one window's cells from a peer to every key, as the federation's gossip consumer would: the call is
 * built by the same builder the service uses (src/federation/gossip/apply.ts applyGossipCall), from a gossip
 * entry built with cells.ts, and a script error fails the section.
 */
async function applyPeerCells(config: Config, rule: RuleInput, keys: readonly string[], sender: number): Promise<void> {
  const topology = topologyOf(config);
  const redis = withScripts(createRegionRedis(config));
  await waitReady(redis);
  const n = topology.regions.length;
  const configured = config.rules.find((r) => r.name === rule.name);
  if (!configured) throw new Error(`rule ${rule.name} is not in the config`);
  const id = Math.floor(Date.now() / configured.period);
  const slot = {
    id,
    c: Array.from({ length: n }, (_, o) => (o === sender ? 1 : 0)),
    x: new Array<number>(n * n).fill(0),
    a: new Array<number>(n * n).fill(0),
    t: Array.from({ length: n }, (_, o) => (o === sender ? Date.now() : 0)),
  };
  let changed = 0;
  try {
    await runCountOrThrow(
      `memory: apply_gossip from region ${sender}`,
      async (i) => {
        const call = applyGossipCall(layoutOf(config), topology, configured, config.federation.leakageBudget, sender, {
          k: keys[i]!,
          t: Date.now(),
          s: [flattenSlot(slot)],
        });
        const reply = await runApplyGossip(redis, call);
        changed += reply.changed ? 1 : 0;
      },
      keys.length,
      256,
      (done) => progress(`memory: gossip from region ${sender}: ${done.toLocaleString('en-US')} / ${keys.length.toLocaleString('en-US')}`),
    );
  } finally {
    await redis.quit();
  }
  // Every key gained a cell it did not have: a run that changed nothing measured nothing.
  if (changed !== keys.length) throw new Error(`apply_gossip changed ${changed} of ${keys.length} keys from region ${sender}`);
}

/** A single region's token-bucket layouts, written directly (one key per API key, with a TTL): before and now. */
async function layoutAlternatives(ctx: BenchContext, count: number): Promise<Row[]> {
  const { admin } = ctx;
  const now = Date.now();
  const key = (i: number) => `qf:{s${i % 64}}:per-key:${String(i).padStart(16, 'A')}`;
  const layouts: { name: string; write: (pipeline: ReturnType<Redis['pipeline']>, i: number) => void }[] = [
    {
      name: 'layout 1 (before): hash {tokens: 998.0166666667, last_refill}',
      write: (p, i) => p.hset(key(i), 'tokens', '998.0166666667', 'last_refill', now + i).pexpire(key(i), 61_000),
    },
    {
      name: 'layout 2 (what the engine writes): F, the µs it is full again, an integer string with PX',
      write: (p, i) => p.set(key(i), (now + i) * 1000 + 120_000, 'PX', 61_000),
    },
    {
      name: 'reference: rate-limiter-flexible (string counter with EX, key rlf:<api key>)',
      write: (p, i) => p.set(`rlf:key-${i}`, 1, 'EX', 60),
    },
  ];
  const rows: Row[] = [];
  for (const layout of layouts) {
    await admin.flushall();
    const before = await usedMemory(admin);
    for (let start = 0; start < count; start += 5_000) {
      const pipeline = admin.pipeline();
      for (let i = start; i < Math.min(count, start + 5_000); i++) layout.write(pipeline, i);
      await pipeline.exec();
    }
    const after = await usedMemory(admin);
    const keys = await stateKeys(admin, '*');
    rows.push({
      layout: layout.name,
      keys: count,
      'used_memory bytes/key': round((after - before) / count, 1),
      'MEMORY USAGE avg': round(await sampledUsage(admin, keys, 500), 1),
    });
  }
  await admin.flushall();
  return rows;
}

export const memorySection: Section = async (ctx) => {
  const { admin } = ctx;
  const count = ctx.options.quick ? 10_000 : 100_000;
  const rows: Row[] = [];
  for (const [algorithm, rule] of Object.entries(RULES) as [AlgorithmName, RuleInput][]) {
    await admin.flushall();
    const before = await usedMemory(admin);
    await populate(ctx, benchConfig(ctx.redisServer.url, [rule]), count, `${algorithm}, one region`);
    const after = await usedMemory(admin);
    const keys = await stateKeys(admin, 'qf:*:per-key:*');
    const perKey = (after - before) / Math.max(1, keys.length);
    const usage = await sampledUsage(admin, keys, 500);
    ctx.figures[`memory.${algorithm}.region1.bytesPerKey`] = perKey;
    ctx.figures[`memory.${algorithm}.region1.memoryUsage`] = usage;
    rows.push({
      algorithm,
      regions: 1,
      state: 'after one decision per key',
      keys: keys.length,
      'used_memory bytes/key': round(perKey, 1),
      'MEMORY USAGE avg': round(usage, 1),
    });
  }
  // Applying two peers' gossip to every key is the slow part: bytes per key do not depend on the key count,
  // so the three-region rows use fewer keys.
  const federatedCount = ctx.options.quick ? 5_000 : 20_000;
  for (const algorithm of ['tokenBucket', 'fixedWindow'] as AlgorithmName[]) {
    const rule = RULES[algorithm];
    await admin.flushall();
    const before = await usedMemory(admin);
    const config = benchConfig(ctx.redisServer.url, [rule], THREE_REGIONS);
    await populate(ctx, config, federatedCount, `${algorithm}, three regions`);
    const keys = await stateKeys(admin, 'qf:*:per-key:*');
    if (keys.length === 0) throw new Error(`no ${algorithm} keys were written in the three-region run`);
    const own = await usedMemory(admin);
    const topology = topologyOf(config);
    for (const sender of topology.peerIndexes) await applyPeerCells(config, rule, keys, sender);
    const withPeers = await usedMemory(admin);
    const pendingKeys = await stateKeys(admin, 'qf:*:p:*');
    const stateUsage = await sampledUsage(admin, keys, 500);
    // Delivered gossip empties the pending sets; what stays is the state itself (and 64 shard markers).
    if (pendingKeys.length) await admin.del(...pendingKeys);
    const delivered = await usedMemory(admin);
    ctx.figures[`memory.${algorithm}.region3.bytesPerKey`] = (delivered - before) / keys.length;
    rows.push({
      algorithm,
      regions: 3,
      state: 'own decision, 2 pending-set entries',
      keys: keys.length,
      'used_memory bytes/key': round((own - before) / keys.length, 1),
    });
    rows.push({
      algorithm,
      regions: 3,
      state: "+ both peers' cells applied (pending)",
      keys: keys.length,
      'used_memory bytes/key': round((withPeers - before) / keys.length, 1),
      'MEMORY USAGE avg': round(stateUsage, 1),
    });
    rows.push({
      algorithm,
      regions: 3,
      state: 'gossip delivered (pending sets empty)',
      keys: keys.length,
      'used_memory bytes/key': round((delivered - before) / keys.length, 1),
    });
  }
  progress('memory: token-bucket layouts');
  const alternatives = await layoutAlternatives(ctx, count);
  const before = Number(alternatives[0]!['used_memory bytes/key']);
  for (const row of alternatives) row['vs layout 1'] = round(Number(row['used_memory bytes/key']) / before);
  await admin.flushall();
  return [
    {
      id: 'memory',
      title: `4. Memory per key, ${count.toLocaleString('en-US')} active keys (seed policy: 1,000/min per API key)`,
      columns: ['algorithm', 'regions', 'state', 'keys', 'used_memory bytes/key', 'MEMORY USAGE avg'],
      rows,
      notes: [
        '"used_memory bytes/key" is the INFO memory used_memory delta over the keys: it includes the key, the value, the TTL entry and ' +
          'the hash-table slots. "MEMORY USAGE avg" (500 sampled keys, SAMPLES 0) counts only the key and its value, so it is lower.',
      ],
    },
    {
      id: 'memory-layouts',
      title: "4b. A single region's token-bucket layouts written directly: before (layout 1) and now (layout 2)",
      columns: ['layout', 'keys', 'used_memory bytes/key', 'MEMORY USAGE avg', 'vs layout 1'],
      rows: alternatives,
    },
  ];
};

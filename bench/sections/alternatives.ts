// 9. Alternatives we could adopt, measured side by side with the engine and rate-limiter-flexible in the same
// rounds (the machine is shared): the lean single-region script, and explicit batching of the decisions one
// event-loop tick produces into one script call. Bench-only code: the service does not use it.
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import { matchRules } from '../../src/engine/rules.ts';
import { allowRule, apiKeyRequest, benchConfig, HIGH_LIMIT, keyOf, type Section } from '../lib/context.ts';
import { closedLoop } from '../lib/load.ts';
import { progress } from '../lib/progress.ts';
import { scriptMicros } from '../lib/redis-stats.ts';
import { median, round } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';

type Decide = (index: number) => Promise<unknown>;

const lua = (name: string) => readFileSync(new URL(`../alternatives/${name}`, import.meta.url), 'utf8');

interface BatchingClient {
  decide(key: string): Promise<[number, number]>;
}

/** Collects the decisions of one tick and sends them as one script call (at most maxBatch keys each). */
function batching(redis: Redis, maxBatch: number): BatchingClient {
  redis.defineCommand('qfBatchFw', { lua: lua('batched-fixed-window.lua') });
  let queue: { key: string; resolve: (value: [number, number]) => void; reject: (error: unknown) => void }[] = [];
  const flush = () => {
    const batch = queue;
    queue = [];
    for (let start = 0; start < batch.length; start += maxBatch) {
      const slice = batch.slice(start, start + maxBatch);
      (redis as unknown as { qfBatchFw(n: number, ...args: (string | number)[]): Promise<number[]> })
        .qfBatchFw(slice.length, ...slice.map((item) => item.key), HIGH_LIMIT, 60_000, 1)
        .then(
          (reply) => slice.forEach((item, i) => item.resolve([reply[1 + i * 2]!, reply[2 + i * 2]!])),
          (error: unknown) => slice.forEach((item) => item.reject(error)),
        );
    }
  };
  return {
    decide(key) {
      return new Promise((resolve, reject) => {
        if (queue.length === 0) setImmediate(flush);
        queue.push({ key, resolve, reject });
      });
    },
  };
}

export const alternativesSection: Section = async (ctx) => {
  const keys = 100_000;
  const rounds = ctx.options.quick ? 1 : 2;
  const durationMs = ctx.ms(2_000, 700);
  const warmupMs = ctx.ms(300, 150);
  const config = benchConfig(ctx.redisServer.url, [allowRule('fixedWindow', 'r')]);
  const redis = createRegionRedis(config);
  await waitReady(redis);
  const engine = createRedisEngine({ config, redis });
  const plain = new Redis(ctx.redisServer.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  plain.defineCommand('qfLeanFw', { numberOfKeys: 1, lua: lua('lean-fixed-window.lua') });
  const batchClient = new Redis(ctx.redisServer.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  const batcher = batching(batchClient, 128);
  const flexible = new RateLimiterRedis({ storeClient: plain, points: HIGH_LIMIT, duration: 60, keyPrefix: 'rlf' });
  // The engine's state keys, computed once: the alternatives below skip matching and hashing on purpose.
  const stateKey = (i: number) => matchRules(config, apiKeyRequest(keyOf(i, keys)))[0]!.key;
  const cases: { id: string; name: string; decide: Decide }[] = [
    { id: 'engine', name: 'quotafed engine (today)', decide: (i) => engine.decide(apiKeyRequest(keyOf(i, keys))) },
    { id: 'rlf', name: 'rate-limiter-flexible', decide: (i) => flexible.consume(keyOf(i, keys), 1) },
    {
      id: 'lean',
      name: 'lean single-region fixed-window script, one call per decision',
      decide: (i) =>
        (plain as unknown as { qfLeanFw(...a: (string | number)[]): Promise<unknown> }).qfLeanFw(stateKey(i), HIGH_LIMIT, 60_000, 1),
    },
    {
      id: 'batched',
      name: 'lean script, decisions of one tick batched into one call (<= 128)',
      decide: (i) => batcher.decide(stateKey(i)),
    },
  ];
  const measured = new Map<string, { rate: number[]; client: number[]; redis: number[] }>();
  try {
    // One unmeasured pass, so the first variant does not pay for the JIT alone.
    for (const item of cases) await closedLoop(item.decide, { concurrency: 64, durationMs: 200, warmupMs: 0 });
    for (let r = 0; r < rounds; r++) {
      for (const item of cases) {
        await ctx.admin.flushall();
        progress(`alternatives: round ${r + 1}/${rounds}: ${item.name}`);
        const micros = await scriptMicros(ctx.admin);
        const cpu = process.cpuUsage();
        const result = await closedLoop(item.decide, { concurrency: 64, durationMs, warmupMs });
        const used = process.cpuUsage(cpu);
        const entry = measured.get(item.id) ?? { rate: [], client: [], redis: [] };
        entry.rate.push(result.achievedPerSec);
        entry.client.push((used.user + used.system) / result.calls);
        entry.redis.push(((await scriptMicros(ctx.admin)) - micros) / result.calls);
        measured.set(item.id, entry);
      }
    }
  } finally {
    await engine.close();
    await redis.quit();
    await plain.quit();
    await batchClient.quit();
    await ctx.admin.flushall();
  }
  const rlf = measured.get('rlf')!;
  const rows: Row[] = cases.map((item) => {
    const entry = measured.get(item.id)!;
    const rate = median(entry.rate);
    const paired = median(entry.rate.map((value, i) => value / rlf.rate[i]!));
    ctx.figures[`alternatives.${item.id}.overRlf`] = paired;
    return {
      variant: item.name,
      'decisions/s': Math.round(rate),
      'vs rlf (paired)': round(paired),
      'client CPU µs': round(median(entry.client), 1),
      'Redis µs': round(median(entry.redis), 1),
      'CPU µs total': round(median(entry.client) + median(entry.redis), 1),
    };
  });
  return [
    {
      id: 'alternatives',
      title: '9. Alternatives (proposal), 100,000 keys, 64 concurrent callers, single region, allow path',
      columns: ['variant', 'decisions/s', 'vs rlf (paired)', 'client CPU µs', 'Redis µs', 'CPU µs total'],
      rows,
      notes: [
        'The lean and batched variants take the state key precomputed (no rule matching or hashing in the loop) and implement only the ' +
          'single-region fixed window: they bound what a fast path in decide.lua plus a batching client in src/engine could reach. ' +
          'Batching across principals spans cluster slots, so on Redis Cluster it must batch per shard.',
      ],
    },
  ];
};

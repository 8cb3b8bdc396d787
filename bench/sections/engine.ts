// 1. The decision engine in-process against rate-limiter-flexible (RateLimiterRedis on ioredis), same Redis,
// same limit (a fixed window of 1e9/min, so every call takes the allow path: like with like), plus
// quotafed's token bucket and the two client settings (auto-pipelining on/off) as extra rows.
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { Redis } from 'ioredis';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import { allowRule, apiKeyRequest, benchConfig, HIGH_LIMIT, keyOf, type BenchContext, type Section } from '../lib/context.ts';
import { closedLoop, openLoop, type LoadResult } from '../lib/load.ts';
import { progress } from '../lib/progress.ts';
import { scriptMicros } from '../lib/redis-stats.ts';
import { median, recordSpread, round } from '../lib/stats.ts';
import type { Row, Table } from '../lib/table.ts';

interface Limiter {
  name: string;
  /** Short id used in figure names. */
  id: string;
  decide(index: number, keyCount: number): Promise<unknown>;
  close(): Promise<void>;
}

/** The local lease the "with leases" row's rule takes (rules[].lease): a hot key's units spent from memory. */
const BENCH_LEASE = { size: 100, ttlMs: 100 };

async function quotafedLimiter(
  ctx: BenchContext,
  id: string,
  name: string,
  algorithm: 'fixedWindow' | 'tokenBucket',
  autoPipelining: boolean,
  leased = false,
): Promise<Limiter> {
  const rule = leased ? { ...allowRule(algorithm, 'r'), lease: BENCH_LEASE } : allowRule(algorithm, 'r');
  const config = benchConfig(ctx.redisServer.url, [rule], { redis: { autoPipelining } });
  const redis = createRegionRedis(config);
  await waitReady(redis);
  const engine = createRedisEngine({ config, redis });
  return {
    id,
    name,
    decide: (index, keyCount) => engine.decide(apiKeyRequest(keyOf(index, keyCount))),
    close: async () => {
      await engine.close();
      await redis.quit();
    },
  };
}

async function flexibleLimiter(ctx: BenchContext, id: string, name: string, autoPipelining: boolean): Promise<Limiter> {
  const redis = new Redis(ctx.redisServer.url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    enableAutoPipelining: autoPipelining,
  });
  await new Promise((resolve) => redis.once('ready', resolve));
  const limiter = new RateLimiterRedis({ storeClient: redis, points: HIGH_LIMIT, duration: 60, keyPrefix: 'rlf' });
  return {
    id,
    name,
    // A rejection is a RateLimiterRes, not an error; with this limit it never happens.
    decide: (index, keyCount) => limiter.consume(keyOf(index, keyCount), 1),
    close: async () => {
      await redis.quit();
    },
  };
}

/** Limiters also measured at fixed offered loads (the others only at saturation). */
const OPEN_LOOP_IDS = new Set(['qf_fw', 'rlf', 'qf_tb']);

export function loadRow(limiter: string, keys: number, load: string, result: LoadResult): Row {
  return {
    limiter,
    keys,
    load,
    'offered/s': result.offeredPerSec === undefined ? null : Math.round(result.offeredPerSec),
    'decisions/s': Math.round(result.achievedPerSec),
    'p50 ms': result.latency.p50Ms,
    'p99 ms': result.latency.p99Ms,
    'p99 from due ms': result.fromDueP99Ms ?? null,
    errors: result.errors,
  };
}

export const engineSection: Section = async (ctx) => {
  const concurrency = 64;
  const satMs = ctx.ms(2_000, 800);
  const openMs = ctx.ms(2_000, 800);
  const warmupMs = ctx.ms(500, 200);
  const keySets = [1, 100_000];
  const makers: { id: string; name: string; make: () => Promise<Limiter> }[] = [
    {
      id: 'qf_fw',
      name: 'quotafed engine, fixed window',
      make: () => quotafedLimiter(ctx, 'qf_fw', 'quotafed engine, fixed window', 'fixedWindow', true),
    },
    {
      id: 'rlf',
      name: 'rate-limiter-flexible (ioredis defaults)',
      make: () => flexibleLimiter(ctx, 'rlf', 'rate-limiter-flexible (ioredis defaults)', false),
    },
    {
      id: 'qf_tb',
      name: 'quotafed engine, token bucket',
      make: () => quotafedLimiter(ctx, 'qf_tb', 'quotafed engine, token bucket', 'tokenBucket', true),
    },
    {
      id: 'rlf_ap',
      name: 'rate-limiter-flexible + autoPipelining',
      make: () => flexibleLimiter(ctx, 'rlf_ap', 'rate-limiter-flexible + autoPipelining', true),
    },
    {
      id: 'qf_fw_lease',
      name: `quotafed engine, fixed window, local lease ${BENCH_LEASE.size} / ${BENCH_LEASE.ttlMs} ms`,
      make: () =>
        quotafedLimiter(
          ctx,
          'qf_fw_lease',
          `quotafed engine, fixed window, local lease ${BENCH_LEASE.size} / ${BENCH_LEASE.ttlMs} ms`,
          'fixedWindow',
          true,
          true,
        ),
    },
    {
      id: 'qf_fw_noap',
      name: 'quotafed engine, fixed window, autoPipelining off',
      make: () => quotafedLimiter(ctx, 'qf_fw_noap', 'quotafed engine, fixed window, autoPipelining off', 'fixedWindow', false),
    },
  ];
  const rows: Row[] = [];
  const ratioRows: Row[] = [];
  const rounds = ctx.options.quick ? 1 : 2;
  for (const keys of keySets) {
    // Saturation, interleaved over rounds (the machine is shared): ratios are taken within a round.
    const perRound: Map<string, LoadResult>[] = [];
    const cost = new Map<string, { client: number; redis: number }>();
    for (let r = 0; r < rounds; r++) {
      const results = new Map<string, LoadResult>();
      for (const { make } of makers) {
        await ctx.admin.flushall();
        const limiter = await make();
        progress(
          `engine: round ${r + 1}/${rounds}: ${limiter.name}, ${keys.toLocaleString('en-US')} key(s), saturation (${concurrency} callers)`,
        );
        const micros = await scriptMicros(ctx.admin);
        const cpu = process.cpuUsage();
        const result = await closedLoop((i) => limiter.decide(i, keys), { concurrency, durationMs: satMs, warmupMs });
        const used = process.cpuUsage(cpu);
        // CPU per decision is what the shared machine cannot distort much: the client's own CPU time and the
        // time Redis reports for the scripts, each divided by the calls made.
        cost.set(`${r}.${limiter.id}`, {
          client: (used.user + used.system) / result.calls,
          redis: ((await scriptMicros(ctx.admin)) - micros) / result.calls,
        });
        results.set(limiter.id, result);
        await limiter.close();
      }
      perRound.push(results);
    }
    const saturation = new Map<string, number>();
    const sectionRows: Row[] = [];
    for (const limiter of makers) {
      const results = perRound.map((inRound) => inRound.get(limiter.id)!);
      const best = results.reduce((a, b) => (a.achievedPerSec >= b.achievedPerSec ? a : b));
      const rate = median(results.map((result) => result.achievedPerSec));
      saturation.set(limiter.id, rate);
      ctx.figures[`engine.${limiter.id}.k${keys}.saturation`] = rate;
      ctx.figures[`engine.${limiter.id}.k${keys}.saturation.p99`] = best.latency.p99Ms;
      const costs = perRound.map((_, r) => cost.get(`${r}.${limiter.id}`)!);
      const clientUs = median(costs.map((c) => c.client));
      const redisUs = median(costs.map((c) => c.redis));
      ctx.figures[`engine.${limiter.id}.k${keys}.clientUs`] = clientUs;
      ctx.figures[`engine.${limiter.id}.k${keys}.redisUs`] = redisUs;
      sectionRows.push({
        ...loadRow(limiter.name, keys, `saturation, ${concurrency} callers`, best),
        'decisions/s': Math.round(rate),
        rounds: results.map((result) => Math.round(result.achievedPerSec)).join(' / '),
        'client CPU µs': round(clientUs, 1),
        'Redis µs': round(redisUs, 1),
      });
    }
    const roundRatios = (a: string, b: string) =>
      perRound.map((results) => results.get(a)!.achievedPerSec / results.get(b)!.achievedPerSec);
    const pairedRatio = (a: string, b: string) => round(median(roundRatios(a, b)));
    // Fixed offered loads: the same absolute rates for every limiter, 25% and 50% of the engine's saturation.
    const reference = saturation.get('qf_fw')!;
    for (const { make, id } of makers) {
      if (!OPEN_LOOP_IDS.has(id)) continue;
      const limiter = await make();
      for (const fraction of [0.25, 0.5]) {
        await ctx.admin.flushall();
        const rate = Math.round(reference * fraction);
        progress(
          `engine: ${limiter.name}, ${keys.toLocaleString('en-US')} key(s), open loop at ${rate}/s ` +
            `(${fraction * 100}% of engine saturation)`,
        );
        const result = await openLoop((i) => limiter.decide(i, keys), { ratePerSec: rate, durationMs: openMs, warmupMs });
        ctx.figures[`engine.${limiter.id}.k${keys}.open${fraction * 100}.p99`] = result.latency.p99Ms;
        ctx.figures[`engine.${limiter.id}.k${keys}.open${fraction * 100}.p50`] = result.latency.p50Ms;
        ctx.figures[`engine.${limiter.id}.k${keys}.open${fraction * 100}.achieved`] = result.achievedPerSec / rate;
        sectionRows.push(loadRow(limiter.name, keys, `open loop, ${fraction * 100}% of engine sat.`, result));
      }
      await limiter.close();
    }
    rows.push(...sectionRows);
    ratioRows.push({
      keys,
      'engine fw / rlf': pairedRatio('qf_fw', 'rlf'),
      'engine tb / rlf': pairedRatio('qf_tb', 'rlf'),
      'engine fw / rlf+autoPipelining': pairedRatio('qf_fw', 'rlf_ap'),
      'engine fw + lease / rlf': pairedRatio('qf_fw_lease', 'rlf'),
      'autoPipelining on / off (engine fw)': pairedRatio('qf_fw', 'qf_fw_noap'),
    });
    ctx.figures[`engine.ratio.fwOverRlf.k${keys}`] = pairedRatio('qf_fw', 'rlf');
    recordSpread(ctx.figures, `engine.ratio.fwOverRlf.k${keys}`, roundRatios('qf_fw', 'rlf'));
    ctx.figures[`engine.ratio.leaseOverRlf.k${keys}`] = pairedRatio('qf_fw_lease', 'rlf');
    recordSpread(ctx.figures, `engine.ratio.leaseOverRlf.k${keys}`, roundRatios('qf_fw_lease', 'rlf'));
    const cpuOf = (id: string) => ctx.figures[`engine.${id}.k${keys}.clientUs`]! + ctx.figures[`engine.${id}.k${keys}.redisUs`]!;
    ctx.figures[`engine.cpuRatio.rlfOverFw.k${keys}`] = cpuOf('rlf') / cpuOf('qf_fw');
    ratioRows[ratioRows.length - 1]!['CPU/decision: rlf / engine fw (>1 = engine cheaper)'] = round(cpuOf('rlf') / cpuOf('qf_fw'));
  }
  // An abusive caller far over its limit: the over-limit cache answers it in memory, without a Redis hop.
  const abuseRows: Row[] = [];
  for (const cache of [true, false]) {
    await ctx.admin.flushall();
    const config = benchConfig(ctx.redisServer.url, [{ name: 'r', by: ['apiKey'], algorithm: 'fixedWindow', limit: 10, period: '1m' }]);
    const redis = createRegionRedis(config);
    await waitReady(redis);
    const engine = createRedisEngine({ config, redis, overLimitCache: cache });
    for (let i = 0; i < 11; i++) await engine.decide(apiKeyRequest('abuser'));
    progress(`engine: abusive key over its limit, over-limit cache ${cache ? 'on' : 'off'}`);
    const result = await closedLoop(() => engine.decide(apiKeyRequest('abuser')), { concurrency, durationMs: satMs, warmupMs });
    ctx.figures[`engine.abusive.${cache ? 'cache' : 'nocache'}`] = result.achievedPerSec;
    abuseRows.push(
      loadRow(`quotafed engine, over-limit cache ${cache ? 'on' : 'off'}`, 1, `saturation, ${concurrency} callers, all denied`, result),
    );
    await engine.close();
    await redis.quit();
  }
  rows.push(...abuseRows);
  await ctx.admin.flushall();
  const tables: Table[] = [
    {
      id: 'engine',
      title: '1. Engine in-process vs rate-limiter-flexible (same redis-server, allow path, limit 1e9/min)',
      columns: [
        'limiter',
        'keys',
        'load',
        'offered/s',
        'decisions/s',
        'p50 ms',
        'p99 ms',
        'p99 from due ms',
        'errors',
        'rounds',
        'client CPU µs',
        'Redis µs',
      ],
      rows,
      notes: [
        'Saturation: median decisions/s over the rounds (each round runs every limiter once, in turn); latency from the best round. The ' +
          'ratios in 1b are medians of per-round ratios.',
        '"client CPU µs": this process\'s CPU time (user+system) per decision; "Redis µs": the script time Redis reports in INFO ' +
          'commandstats per decision. Both hold up on a busy machine far better than decisions/s, and their sum ' +
          'is the CPU a decision costs.',
        'p50/p99 count from the call; "p99 from due" counts from when an open-loop request was due (includes the generator\'s ~1 ms ' +
          'timer granularity, so no coordinated omission).',
      ],
    },
    {
      id: 'engine-ratios',
      title: '1b. Saturation ratios (paired within each round)',
      columns: [
        'keys',
        'engine fw / rlf',
        'engine tb / rlf',
        'engine fw / rlf+autoPipelining',
        'engine fw + lease / rlf',
        'autoPipelining on / off (engine fw)',
        'CPU/decision: rlf / engine fw (>1 = engine cheaper)',
      ],
      rows: ratioRows,
      notes: [
        `"lease": the same rule with rules[].lease { size: ${BENCH_LEASE.size}, ttlMs: ${BENCH_LEASE.ttlMs} } (docs/leases.md): a key seen twice ` +
          'within 100 ms takes up to 100 units in its decide call and spends them from memory. 100,000 keys visited in turn are never ' +
          'hot, so that row measures what leases cost a cold key.',
      ],
    },
  ];
  return tables;
};

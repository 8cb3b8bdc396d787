// 6. Redis commands per decision, from INFO commandstats deltas around a batch of decisions.
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import type { RequestContext } from '../../src/engine/types.ts';
import { benchConfig, HIGH_LIMIT, type RuleInput, type Section } from '../lib/context.ts';
import { progress } from '../lib/progress.ts';
import { callsDelta, commandCalls, totalCalls } from '../lib/redis-stats.ts';
import type { Row } from '../lib/table.ts';

interface Case {
  name: string;
  id: string;
  rules: RuleInput[];
  cache: boolean;
  /** Request i of the measured batch. */
  request: (i: number) => RequestContext;
  /** Calls made before the snapshot (loads the script on the connection, exhausts a key…). */
  prime: (i: number) => RequestContext;
  primeCount: number;
  /** Decisions submitted together (the micro-batcher shares calls among them); one at a time when absent. */
  concurrent?: number;
}

const req = (apiKey: string, path = '/v1/items', ip = '10.0.0.1'): RequestContext => ({ apiKey, ip, method: 'GET', path });

export const commandsSection: Section = async (ctx) => {
  const n = ctx.options.quick ? 300 : 2_000;
  const cases: Case[] = [
    {
      name: 'allow path (fresh keys, token bucket)',
      id: 'allow',
      rules: [{ name: 'tb', by: ['apiKey'], algorithm: 'tokenBucket', limit: HIGH_LIMIT, period: '1m' }],
      cache: true,
      request: (i) => req(`allow-${i}`),
      prime: () => req('warm'),
      primeCount: 1,
    },
    {
      name: 'allow path, 64 decisions submitted together (fresh keys, token bucket; micro-batched)',
      id: 'batched',
      rules: [{ name: 'tb', by: ['apiKey'], algorithm: 'tokenBucket', limit: HIGH_LIMIT, period: '1m' }],
      cache: true,
      request: (i) => req(`batched-${i}`),
      prime: () => req('warm'),
      primeCount: 1,
      concurrent: 64,
    },
    {
      name: 'deny path, over-limit cache off (one key, 1/min)',
      id: 'deny',
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1, period: '1m' }],
      cache: false,
      request: () => req('abuser'),
      prime: () => req('abuser'),
      primeCount: 2,
    },
    {
      name: 'deny path answered by the over-limit cache',
      id: 'cache',
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1, period: '1m' }],
      cache: true,
      request: () => req('abuser'),
      prime: () => req('abuser'),
      primeCount: 2,
    },
    {
      name: 'three rules of one API key (per-key tb + /search sw + per-key fw), allowed',
      id: 'multi',
      rules: [
        { name: 'per-key', by: ['apiKey'], algorithm: 'tokenBucket', limit: HIGH_LIMIT, period: '1m' },
        {
          name: 'search',
          match: { endpoints: ['/search'] },
          by: ['apiKey', 'endpoint'],
          algorithm: 'slidingWindow',
          limit: HIGH_LIMIT,
          period: '1m',
        },
        { name: 'minute', by: ['apiKey'], algorithm: 'fixedWindow', limit: HIGH_LIMIT, period: '1m' },
      ],
      cache: true,
      request: (i) => req(`multi-${i}`, '/search'),
      prime: () => req('warm', '/search'),
      primeCount: 1,
    },
    {
      name: 'rules of two identities (API key + client IP), allowed',
      id: 'two-identities',
      rules: [
        { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: HIGH_LIMIT, period: '1m' },
        { name: 'per-ip', by: ['ip'], algorithm: 'fixedWindow', limit: HIGH_LIMIT, period: '1m' },
      ],
      cache: true,
      // An API key and an IP that land in different shards (different cluster slots) in most cases.
      request: (i) => req(`two-${i}`, '/v1/items', `10.1.${(i >> 8) & 255}.${i & 255}`),
      prime: () => req('warm', '/v1/items', '10.9.9.9'),
      primeCount: 1,
    },
  ];
  const rows: Row[] = [];
  for (const item of cases) {
    await ctx.admin.flushall();
    progress(`commands: ${item.name}, ${n} decisions`);
    const config = benchConfig(ctx.redisServer.url, item.rules);
    const redis = createRegionRedis(config);
    await waitReady(redis);
    const engine = createRedisEngine({ config, redis, overLimitCache: item.cache });
    for (let i = 0; i < item.primeCount; i++) await engine.decide(item.prime(i));
    const before = await commandCalls(ctx.admin);
    let allowed = 0;
    const sources = new Set<string>();
    const step = item.concurrent ?? 1;
    for (let i = 0; i < n; i += step) {
      const decisions = await Promise.all(Array.from({ length: Math.min(step, n - i) }, (_, j) => engine.decide(item.request(i + j))));
      for (const decision of decisions) {
        if (decision.allowed) allowed++;
        for (const outcome of decision.outcomes) sources.add(outcome.source);
      }
    }
    const delta = callsDelta(before, await commandCalls(ctx.admin));
    await engine.close();
    await redis.quit();
    // The engine only ever sends scripts and functions, so FCALL/EVALSHA/EVAL are its round trips; the rest ran inside them.
    const roundTrips = (delta.fcall ?? 0) + (delta.evalsha ?? 0) + (delta.eval ?? 0);
    const perDecision = roundTrips / n;
    ctx.figures[`commands.${item.id}.perDecision`] = perDecision;
    rows.push({
      case: item.name,
      decisions: n,
      allowed,
      'answered by': [...sources].join(', '),
      'Redis commands':
        Object.entries(delta)
          .map(([name, count]) => `${name} ${count}`)
          .join(', ') || 'none',
      'round trips / decision': Math.round(perDecision * 1000) / 1000,
      'in-script calls / decision': Math.round(((totalCalls(delta) - roundTrips) / n) * 1000) / 1000,
    });
  }
  await ctx.admin.flushall();
  return [
    {
      id: 'commands',
      title: '6. Redis commands per decision (INFO commandstats deltas)',
      columns: ['case', 'decisions', 'allowed', 'answered by', 'Redis commands', 'round trips / decision', 'in-script calls / decision'],
      rows,
      notes: [
        "Every command Redis executed between the snapshots is listed (the bench's own INFO calls excluded); commandstats also counts " +
          'the calls a script makes inside Redis. A round trip is one FCALL (decide, a Redis Functions library) or EVALSHA/EVAL (a ' +
          'refund): the engine sends nothing else on the decision path.',
        'Decisions submitted in one turn of the event loop share one FCALL, and those that arrive while it is in flight share ' +
          'the next (src/engine/decide-batcher.ts), so round trips per decision fall below one.',
        'Rules of two identities live in two cluster slots, so they take one script per slot (two round trips, sent concurrently) unless ' +
          'both hash to the same shard.',
      ],
    },
  ];
};

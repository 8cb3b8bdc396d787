// 11. Optional features off and on: client CPU per decision of the resilient engine (how the service decides),
// in process, 100,000 keys, 64 callers, one region, the per-key token bucket. The baseline is every optional
// feature off; each other row turns one on as an operator would (top keys, allow/deny lists, plans per key,
// OpenTelemetry tracing to a local OTLP/HTTP sink), and the first row is the Redis engine without the wrapper.
// Issue 24: "the bench shows no cost for the features that are off" — off is the baseline, so each feature's row
// is its whole cost when on, and the baseline against the bare engine is what the wrapper costs with all off.
import { createServer, type Server } from 'node:http';
import type { ConfigInput } from '../../src/config/schema.ts';
import { createTunedRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { startTracing } from '../../src/engine/tracing.ts';
import type { DecisionEngine } from '../../src/engine/types.ts';
import { silentLogger } from '../../src/log.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import { allowRule, apiKeyRequest, benchConfig, keyOf, type BenchContext, type Section } from '../lib/context.ts';
import { closedLoop } from '../lib/load.ts';
import { progress } from '../lib/progress.ts';
import { median, round } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';

const KEYS = 100_000;
const CALLERS = 64;

interface Variant {
  name: string;
  /** Config beside the rule; every variant but `bare` is decided by the resilient wrapper. */
  extra: Partial<ConfigInput>;
  bare?: boolean;
  tracing?: boolean;
}

const OFF: Partial<ConfigInput> = { topKeys: { enabled: false }, tracing: { enabled: false } };

function denyEntries(count: number): { ip: string }[] {
  return Array.from({ length: count }, (_, i) => ({ ip: `198.51.${Math.floor(i / 250)}.${i % 250}` }));
}

function variants(sinkUrl: string): Variant[] {
  return [
    { name: 'Redis engine alone (no resilient wrapper)', extra: OFF, bare: true },
    { name: 'every optional feature off (baseline)', extra: OFF },
    { name: 'top keys on (the default)', extra: { tracing: { enabled: false } } },
    { name: 'lists: 1,000 deny entries, caller not listed', extra: { ...OFF, lists: { deny: denyEntries(1_000) } } },
    {
      name: 'plans: 3 tiers, 1,000 keys assigned, caller on the default',
      extra: {
        ...OFF,
        plans: {
          default: 'free',
          tiers: { free: { r: { limit: 500_000_000 } }, pro: { r: { limit: 900_000_000 } }, unlimited: 'unlimited' },
          keys: Object.fromEntries(Array.from({ length: 1_000 }, (_, i) => [`assigned-${i}`, i % 2 ? 'pro' : 'unlimited'])),
        },
      },
    },
    {
      name: 'tracing on (every decision, OTLP/HTTP to a local sink)',
      extra: { topKeys: { enabled: false }, tracing: { otlpEndpoint: sinkUrl } },
      tracing: true,
    },
  ];
}

/** An OTLP/HTTP collector that accepts and drops every export. */
async function startSink(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, server };
}

async function measure(ctx: BenchContext, variant: Variant): Promise<{ client: number; rate: number }> {
  const config = benchConfig(ctx.redisServer.url, [allowRule('tokenBucket', 'r')], variant.extra);
  const redis = createRegionRedis(config);
  await waitReady(redis);
  const inner = createTunedRedisEngine({ config, redis });
  const tracer = variant.tracing ? await startTracing(config, {}) : undefined;
  const engine: DecisionEngine = variant.bare
    ? inner
    : createResilientEngine({ config, inner, probe: () => redis.ping(), logger: silentLogger(), tracer });
  try {
    const cpu = process.cpuUsage();
    const result = await closedLoop((i) => engine.decide(apiKeyRequest(keyOf(i, KEYS))), {
      concurrency: CALLERS,
      durationMs: ctx.ms(2_000, 700),
      warmupMs: ctx.ms(400, 200),
    });
    const used = process.cpuUsage(cpu);
    return { client: (used.user + used.system) / result.calls, rate: result.achievedPerSec };
  } finally {
    await engine.close();
    await tracer?.shutdown();
    await redis.quit();
  }
}

export const featuresSection: Section = async (ctx) => {
  const sink = await startSink();
  const rounds = ctx.options.quick ? 1 : 3;
  const all = variants(sink.url);
  const samples = new Map<string, { client: number[]; rate: number[] }>(all.map((v) => [v.name, { client: [], rate: [] }]));
  try {
    for (let round = 0; round < rounds; round++) {
      // Another order each round: the first after a flush pays for new keys.
      for (const variant of round % 2 === 0 ? all : [...all].reverse()) {
        progress(`features: round ${round + 1}/${rounds}, ${variant.name}`);
        await ctx.admin.flushall();
        const { client, rate } = await measure(ctx, variant);
        samples.get(variant.name)!.client.push(client);
        samples.get(variant.name)!.rate.push(rate);
      }
    }
  } finally {
    await new Promise<void>((resolve) => sink.server.close(() => resolve()));
  }
  const baseline = median(samples.get(all[1]!.name)!.client);
  const rows: Row[] = all.map((variant) => {
    const client = median(samples.get(variant.name)!.client);
    return {
      variant: variant.name,
      'client CPU µs/decision': round(client, 1),
      'vs baseline': round(client / baseline, 2),
      'decisions/s': Math.round(median(samples.get(variant.name)!.rate)),
    };
  });
  for (const row of rows) ctx.figures[`features: ${row.variant}`] = row['client CPU µs/decision'] as number;
  return [
    {
      id: 'features',
      title: `11. Optional features off and on: the resilient engine in process (${KEYS.toLocaleString('en-US')} keys, ${CALLERS} callers, token bucket)`,
      columns: ['variant', 'client CPU µs/decision', 'vs baseline', 'decisions/s'],
      rows,
      notes: [
        `Medians of ${rounds} rounds, each variant on a flushed Redis, in another order each round. Client CPU is this process's ` +
          'user + system time over the run ÷ decisions (Redis time is the same script for every row). "Off" is the baseline: a ' +
          "feature that is off runs none of its code but a flag check, so each row's ratio is that feature's whole cost when on.",
      ],
    },
  ];
};

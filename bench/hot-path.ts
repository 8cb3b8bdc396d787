// `npx tsx bench/hot-path.ts [fixedWindow|tokenBucket]`: CPU per decision of the engine alone and under the
// resilient wrapper (the way the service decides), with and without the micro-batcher and the single-region script,
// through Redis Functions and through EVALSHA, 100,000 keys, 64 callers. CPU time per decision holds up on a
// busy machine; "per call" is the mean number of decisions per FCALL/EVALSHA (the batch size). The resilient rows
// also compare the top-keys sketches on (the default) and off (`topKeys.enabled: false`). `ONLY=resilient` runs the
// variants whose name contains that text; each round runs them in another order (the first after a flush pays more).
import { createTunedRedisEngine } from '../src/engine/redis-engine.ts';
import type { RedisEngineTuning } from '../src/engine/redis-engine-tuning.ts';
import { createRegionRedis, waitReady } from '../src/store/client.ts';
import { createResilientEngine } from '../src/engine/resilient.ts';
import { silentLogger } from '../src/log.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { allowRule, apiKeyRequest, benchConfig, keyOf, newClient } from './lib/context.ts';
import { closedLoop } from './lib/load.ts';
import { commandCalls, scriptMicros } from './lib/redis-stats.ts';
import { median } from './lib/stats.ts';

const rounds = Number(process.env.ROUNDS ?? 3);
const server = await startRedis();
const admin = newClient(server.url);
const algorithm = (process.argv[2] ?? 'fixedWindow') as 'fixedWindow' | 'tokenBucket';
const config = benchConfig(server.url, [allowRule(algorithm, 'r')]);
const withoutTopKeys = { ...config, topKeys: { ...config.topKeys, enabled: false } };
const rows: Record<string, { client: number[]; redis: number[]; rate: number[]; perCall: number[] }> = {};
const VARIANTS = {
  'before (no batch, decide.lua)': { batch: false, singleRegionScript: false },
  'single-region script only': { batch: false, singleRegionScript: true },
  'batch only': { batch: true, singleRegionScript: false },
  'batch + single-region (default)': {},
  'default, EVALSHA': { redisFunctions: false },
  'resilient + default': {},
  'resilient, topKeys off': {},
} as const satisfies Record<string, RedisEngineTuning>;
const callCount = async () =>
  Object.entries(await commandCalls(admin)).reduce((sum, [name, calls]) => (/^(fcall|evalsha|eval)$/.test(name) ? sum + calls : sum), 0);
const only = process.env.ONLY;
const variants = Object.entries(VARIANTS).filter(([name]) => only === undefined || name.includes(only));
for (let r = 0; r < rounds; r++) {
  for (const [variant, knobs] of r % 2 === 0 ? variants : [...variants].reverse()) {
    await admin.flushall();
    const redis = createRegionRedis(config);
    await waitReady(redis);
    const inner = createTunedRedisEngine({ config, redis, ...knobs });
    const engine = !variant.startsWith('resilient')
      ? inner
      : createResilientEngine({
          config: variant.includes('topKeys off') ? withoutTopKeys : config,
          inner,
          probe: () => redis.ping(),
          logger: silentLogger(),
        });
    const micros = await scriptMicros(admin);
    const callsBefore = await callCount();
    const cpu = process.cpuUsage();
    const result = await closedLoop((i) => engine.decide(apiKeyRequest(keyOf(i, 100_000))), {
      concurrency: 64,
      durationMs: 1_500,
      warmupMs: 300,
    });
    const used = process.cpuUsage(cpu);
    const row = (rows[variant] ??= { client: [], redis: [], rate: [], perCall: [] });
    row.perCall.push(result.calls / ((await callCount()) - callsBefore));
    row.client.push((used.user + used.system) / result.calls);
    row.redis.push(((await scriptMicros(admin)) - micros) / result.calls);
    row.rate.push(result.achievedPerSec);
    await engine.close();
    await redis.quit();
  }
}
for (const [variant, row] of Object.entries(rows)) {
  console.log(
    `${variant.padEnd(30)} client CPU ${median(row.client).toFixed(1)} µs  Redis ${median(row.redis).toFixed(1)} µs  ` +
      `${Math.round(median(row.rate))}/s  ${median(row.perCall).toFixed(1)} per call`,
  );
}
await admin.quit();
await server.stop();
process.exit(0);

// `npx tsx bench/hot-path.ts`: CPU per decision of the engine alone and under the resilient wrapper (the way
// the service decides), decide through Redis Functions and through EVALSHA, 100,000 keys, 64 callers. CPU time per decision holds up on a busy machine.
import { createRedisEngine } from '../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../src/engine/redis-client.ts';
import { createResilientEngine } from '../src/engine/resilient.ts';
import { silentLogger } from '../src/log.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { allowRule, apiKeyRequest, benchConfig, keyOf, newClient } from './lib/context.ts';
import { closedLoop } from './lib/load.ts';
import { scriptMicros } from './lib/redis-stats.ts';
import { median } from './lib/stats.ts';

const rounds = Number(process.env.ROUNDS ?? 3);
const server = await startRedis();
const admin = newClient(server.url);
const config = benchConfig(server.url, [allowRule('fixedWindow', 'r')]);
const rows: Record<string, { client: number[]; redis: number[]; rate: number[] }> = {};
for (let r = 0; r < rounds; r++) {
  for (const variant of ['engine', 'engine-evalsha', 'resilient'] as const) {
    await admin.flushall();
    const redis = createRegionRedis(config);
    await waitReady(redis);
    const inner = createRedisEngine({ config, redis, redisFunctions: variant !== 'engine-evalsha' });
    const engine = variant !== 'resilient' ? inner : createResilientEngine({ config, inner, probe: () => redis.ping(), logger: silentLogger() });
    const micros = await scriptMicros(admin);
    const cpu = process.cpuUsage();
    const result = await closedLoop((i) => engine.decide(apiKeyRequest(keyOf(i, 100_000))), { concurrency: 64, durationMs: 1_500, warmupMs: 300 });
    const used = process.cpuUsage(cpu);
    const row = (rows[variant] ??= { client: [], redis: [], rate: [] });
    row.client.push((used.user + used.system) / result.calls);
    row.redis.push(((await scriptMicros(admin)) - micros) / result.calls);
    row.rate.push(result.achievedPerSec);
    await engine.close();
    await redis.quit();
  }
}
for (const [variant, row] of Object.entries(rows)) {
  console.log(`${variant.padEnd(15)} client CPU ${median(row.client).toFixed(1)} µs  Redis ${median(row.redis).toFixed(1)} µs  ${Math.round(median(row.rate))}/s`);
}
await admin.quit();
await server.stop();
process.exit(0);

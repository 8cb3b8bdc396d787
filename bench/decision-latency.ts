// How long a Redis decision takes under random-key load alone (no fault), to pick redis.commandTimeoutMs:
// a region service (commandTimeoutMs 10 s, so nothing times out and the raw distribution shows) on its own
// redis-server, autocannon in another process posting /v1/check with a new API key per request at saturation.
// Prints the share of decide calls slower than each candidate timeout (quotafed_redis_command_duration_seconds).
// With a third argument the service runs with that command timeout instead (e.g. the default, 500) and the run
// also reports decide timeouts and breaker transitions: with random-key load alone the breaker must stay closed.
//   npx tsx bench/decision-latency.ts [connections=32] [seconds=5] [commandTimeoutMs]
import { parseConfig } from '../src/config/load.ts';
import { silentLogger } from '../src/log.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { startRegionService } from '../src/service.ts';
import { runLoad } from './lib/processes.ts';

const connections = Number(process.argv[2] ?? 32);
const seconds = Number(process.argv[3] ?? 5);
const commandTimeoutMs = process.argv[4] === undefined ? 10_000 : Number(process.argv[4]);

const redis = await startRedis();
const service = await startRegionService(
  parseConfig({
    region: 'bench',
    port: 0,
    logLevel: 'silent',
    redis: { url: redis.url, commandTimeoutMs },
    rules: [
      { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000_000, period: '1m' },
      { name: 'probe', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '30s', failMode: 'closed' },
    ],
  }),
  { logger: silentLogger(), federation: false },
);
try {
  const load = await runLoad({
    url: service.url,
    method: 'POST',
    path: '/v1/check',
    connections,
    durationS: seconds,
    warmupS: 1,
    apiKeys: 10_000_000,
  });
  const page = await (await fetch(`${service.url}/metrics`)).text();
  const buckets = new Map<number, number>();
  let count = 0;
  for (const line of page.split('\n')) {
    // Label order is prom-client's (le, the default region, command): match the labels, not their order.
    const series = /^quotafed_redis_command_duration_seconds_(bucket|count)\{([^}]*)\} (\d+)/.exec(line);
    if (!series || !/(?:^|,)command="decide"(?:,|$)/.test(series[2]!)) continue;
    const le = /(?:^|,)le="([^"]+)"/.exec(series[2]!)?.[1];
    if (series[1] === 'bucket' && le !== undefined) buckets.set(le === '+Inf' ? Infinity : Number(le), Number(series[3]));
    if (series[1] === 'count') count = Number(series[3]);
  }
  console.log(
    `load: ${connections} connections, ${seconds} s, ${Math.round(load.rps)} req/s, p50 ${load.p50Ms} ms, p99 ${load.p99Ms} ms, statuses ` +
      `${JSON.stringify(load.statuses)}`,
  );
  console.log(`decide calls: ${count} (command timeout ${commandTimeoutMs} ms)`);
  const sum = (pattern: RegExp) => [...page.matchAll(pattern)].reduce((total, match) => total + Number(match[1]), 0);
  console.log(
    `decide errors/timeouts: ${sum(/^quotafed_redis_errors_total\{[^}]*command="decide"[^}]*\} (\S+)/gm)}, breaker opened: ` +
      `${sum(/^quotafed_breaker_transitions_total\{[^}]*to="open"[^}]*\} (\S+)/gm)} times`,
  );
  console.log('| decide slower than | calls | share |');
  console.log('| --- | --- | --- |');
  for (const [le, atMost] of [...buckets].sort((a, b) => a[0] - b[0])) {
    if (le < 0.005 || le === Infinity) continue;
    const slower = count - atMost;
    console.log(`| ${le * 1000} ms | ${slower} | ${((100 * slower) / Math.max(1, count)).toFixed(3)} % |`);
  }
} finally {
  await service.close();
  await redis.stop();
}

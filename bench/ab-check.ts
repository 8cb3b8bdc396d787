// `npx tsx bench/ab-check.ts [rounds] [fresh,hot,gateway,middleware] [other checkout]`: POST /v1/check with us-east's
// rules in one region, against Hono + rate-limiter-flexible (and the bare Hono handler for fresh keys), interleaved
// rounds, 50 connections, req/s and server CPU µs per request; `gateway`: GET forwarded to a local upstream against a
// bare Hono proxy; `middleware`: GET /v1/items through Hono with quotafed's middleware against rate-limiter-flexible's
// middleware app (bench section 2's pair, fresh API keys). With another checkout's path (its node_modules in place),
// its service runs beside this one's in the same rounds: an A/B of two versions on a shared machine.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { startRedis } from '../src/ops/redis-process.ts';
import { newClient } from './lib/context.ts';
import { commandCalls } from './lib/redis-stats.ts';
import { median } from './lib/stats.ts';
import { runLoad, startServer, warmUp, type ServerProcess } from './lib/processes.ts';
import type { ServerOptions } from './http/server.ts';

const rounds = Number(process.argv[2] ?? 2);
const modes = (process.argv[3] ?? 'fresh,hot').split(',');
const other = process.argv[4];
const redis = await startRedis();
const redisUrl = redis.url;
const admin = newClient(redisUrl);
/** Round trips to Redis so far: script calls (FCALL, EVALSHA, EVAL). */
const roundTrips = async () =>
  Object.entries(await commandCalls(admin)).reduce((sum, [name, calls]) => (/^(fcall|evalsha|eval)$/.test(name) ? sum + calls : sum), 0);
const upstream = await startServer('upstream');
const file = parseYaml(readFileSync(new URL('../regions/us-east.yaml', import.meta.url), 'utf8')) as { rules: unknown[] };
const config = { region: 'us-east', rules: file.rules, upstream: { url: upstream.url } } as NonNullable<ServerOptions['config']>;
const servers: Record<string, ServerProcess> = {
  bare: await startServer('bare'),
  ...(modes.includes('gateway') ? { proxy: await startServer('bare-proxy', { upstreamUrl: upstream.url }) } : {}),
  rlf: await startServer('rlf-check', { redisUrl, limit: 1000 }),
  // Beside another checkout, this one's keys live under their own prefix: the two versions never read each other's
  // state (a hot key would otherwise be decided by both, in whatever layout each writes).
  quotafed: await startServer('service', { redisUrl, config: other ? { ...config, redis: { keyPrefix: 'qfab' } } : config }),
  ...(other ? { other: await startServer('service', { redisUrl, config }, join(other, 'bench/http/server.ts')) } : {}),
  ...(modes.includes('middleware')
    ? {
        mw: await startServer('middleware', { redisUrl }),
        rlfmw: await startServer('rlf', { redisUrl }),
        ...(other ? { othermw: await startServer('middleware', { redisUrl }, join(other, 'bench/http/server.ts')) } : {}),
      }
    : {}),
};
/** The middleware apps answer GET /v1/items; the rest are the /v1/check pair and the gateway pair. */
const MIDDLEWARE_APPS = new Set(['mw', 'rlfmw', 'othermw']);
const results: Record<string, { rps: number[]; cpu: number[]; trips: number[] }> = {};
// Every server warms up alike first (warmUp says why).
await warmUp(
  Object.entries(servers).map(([name, server]) => ({
    server,
    method: name === 'proxy' || MIDDLEWARE_APPS.has(name) ? 'GET' : 'POST',
    extra: { apiKeys: 10_000_000 },
  })),
  { durationS: 2, connections: 50 },
);
for (let r = 0; r < rounds; r++) {
  for (const mode of modes) {
    const extra = mode === 'hot' ? { apiKey: 'hot-key', apiKeys: 1 } : { apiKeys: 10_000_000 };
    const names = Object.keys(servers).filter((name) =>
      mode === 'middleware'
        ? MIDDLEWARE_APPS.has(name)
        : mode === 'gateway'
          ? name === 'proxy' || name === 'quotafed' || name === 'other'
          : name !== 'proxy' && !MIDDLEWARE_APPS.has(name) && (mode === 'fresh' || name !== 'bare'),
    );
    for (const name of names) {
      const server = servers[name]!;
      const before = server.cpuMicros()!;
      const tripsBefore = await roundTrips();
      const figures = await runLoad({
        url: server.url,
        // The gateway rows forward a GET to the upstream (the bench's http section's path); the others ask /v1/check.
        method: mode === 'gateway' || mode === 'middleware' ? 'GET' : 'POST',
        path: mode === 'gateway' || mode === 'middleware' ? '/v1/items' : '/v1/check',
        connections: 50,
        durationS: 2.5,
        warmupS: 0.5,
        ...extra,
      });
      const row = (results[`${mode} ${name}`] ??= { rps: [], cpu: [], trips: [] });
      row.trips.push(((await roundTrips()) - tripsBefore) / figures.allRequests);
      row.rps.push(figures.rps);
      row.cpu.push((server.cpuMicros()! - before) / figures.allRequests);
      process.stderr.write(
        `${mode} ${name}: ${Math.round(figures.rps)} req/s, ${row.cpu.at(-1)!.toFixed(1)} µs/req ${JSON.stringify(figures.statuses)}\n`,
      );
    }
  }
}
for (const [name, row] of Object.entries(results))
  console.log(
    `${name.padEnd(16)} ${String(Math.round(median(row.rps))).padStart(6)} req/s  server CPU ${median(row.cpu).toFixed(1)} µs/req ` +
      `(rounds ${row.cpu.map((c) => c.toFixed(0)).join(' / ')} µs)  Redis round trips/req ${median(row.trips).toFixed(3)}`,
  );
for (const server of Object.values(servers)) await server.stop();
await upstream.stop();
await admin.quit();
await redis.stop();
process.exit(0);

// CPU profile of one HTTP server under load:
// `npx tsx bench/profile.ts [check|gateway|rlf-check|middleware|rlf-middleware] [seconds] [hot] [seed] [prewarm]`.
// middleware / rlf-middleware: Hono with quotafed's middleware or rate-limiter-flexible's, GET /v1/items (bench section 2).
// `seed`: us-east's four rules in one region (what the bench's http section runs) instead of the one per-key rule;
// `prewarm`: a fresh-key load first, as the bench runs before its hot-key row (the profile covers the last run only);
// `federated`: the region federated with two peers (their redis-servers only: the gossip goes to their queues);
// `rate=N`: a fixed open-loop rate of N requests/s over 8 connections (as the bench's half-saturation rows) instead of
// saturation with 32.
// Starts its own redis-server (and upstream for the gateway), runs the server under `node --cpu-prof` with the
// one-region seed rule (1,000 per minute per API key, token bucket), loads it with autocannon (fresh API key per
// request), and prints the top self-time entries plus the busy time under a few named frames.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { startRedis } from '../src/ops/redis-process.ts';
import { stopChild } from '../src/ops/stop-child.ts';
import { inclusiveFrames, readProfile, summarise } from './lib/cpu-profile.ts';
import { processCpuMicros, runLoad, startServer } from './lib/processes.ts';

const SERVER = fileURLToPath(new URL('./http/server.ts', import.meta.url));
const target = (process.argv[2] ?? 'check') as 'check' | 'gateway' | 'rlf-check' | 'middleware' | 'rlf-middleware';
const seconds = Number(process.argv[3] ?? 5);
/** `hot`: one API key for every request (the seed rule then denies most of them) instead of a fresh key each. */
const flags = new Set(process.argv.slice(4));
const hot = flags.has('hot');
const seedRules = flags.has('seed');
const prewarm = flags.has('prewarm');
const federated = flags.has('federated');
const rateFlag = [...flags].find((flag) => flag.startsWith('rate='));
const rate = rateFlag === undefined ? undefined : Number(rateFlag.slice('rate='.length));

async function main(): Promise<void> {
  const redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), 'qf-prof-'));
  const upstream = target === 'gateway' ? await startServer('upstream') : undefined;
  const peers = federated ? await Promise.all([startRedis(), startRedis()]) : [];
  const config = {
    region: 'us-east',
    rules: seedRules
      ? (parseYaml(readFileSync(new URL('../regions/us-east.yaml', import.meta.url), 'utf8')) as { rules: unknown[] }).rules
      : [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'tokenBucket', limit: 1000, period: '1m' }],
    ...(upstream ? { upstream: { url: upstream.url } } : {}),
    ...(federated
      ? {
          federation: {
            bootstrap: 'new',
            peers: peers.map((peer, i) => ({ name: ['eu-west', 'ap-south'][i], redisUrl: peer.url })),
          },
        }
      : {}),
  };
  // rlf-check: Hono + rate-limiter-flexible on the same route and body, for comparison.
  const [mode, options] =
    target === 'rlf-check'
      ? ['rlf-check', { redisUrl: redis.url, limit: 1000 }]
      : target === 'middleware'
        ? ['middleware', { redisUrl: redis.url }]
        : target === 'rlf-middleware'
          ? ['rlf', { redisUrl: redis.url }]
          : ['service', { redisUrl: redis.url, config }];
  const child = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--import', 'tsx', SERVER, mode, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /READY (\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
  });
  const load = {
    url,
    method: target.endsWith('check') ? 'POST' : 'GET',
    path: target.endsWith('check') ? '/v1/check' : target === 'gateway' ? '/items' : '/v1/items',
    connections: rate === undefined ? 32 : 8,
    durationS: seconds,
    ...(rate === undefined ? {} : { overallRate: rate }),
  } as const;
  if (prewarm) await runLoad({ ...load, warmupS: 0, apiKeys: 10_000_000 });
  const cpuBefore = processCpuMicros(child.pid);
  const figures = await runLoad({ ...load, warmupS: 1, apiKeys: 1_000_000, ...(hot ? { apiKey: 'hot-key' } : {}) });
  const cpuAfter = processCpuMicros(child.pid);
  const cpuPerRequest = cpuBefore !== undefined && cpuAfter !== undefined ? (cpuAfter - cpuBefore) / figures.allRequests : NaN;
  await stopChild(child, 15_000);
  upstream && (await upstream.stop());
  await redis.stop();
  for (const peer of peers) await peer.stop();
  const profile = readProfile(dir);
  const under = [
    /bodyLimit/,
    /^(readBody|readJson)/,
    /decide /,
    /decideMatched/,
    /newRequest|getRequestCache|Request /,
    /\(garbage collector\)/,
    /writeFromReadableStream|responseViaResponseObject|responseViaCache/,
    /rateLimitHeaders|applyHeaders/,
    /safeParse|acceptCheckBody/,
    /observe|inc /,
    /proxy /,
    /matchRules/,
    /withDeadline|setTimeout/,
    /stringify/,
  ];
  const summary = summarise(profile, under, (seconds - 0.2) * 1000);
  const busy = summary.total - summary.idle;
  const pct = (count: number) => `${((100 * count) / busy).toFixed(1)}%`;
  process.stdout.write(
    `${target}: ${Math.round(figures.rps)} req/s, p99 ${figures.p99Ms} ms, statuses ${JSON.stringify(figures.statuses)}; ` +
      `server CPU ${cpuPerRequest.toFixed(1)} µs/req (profiler on); profile in ${dir}\n`,
  );
  process.stdout.write(`busy samples ${busy} of ${summary.total}\n\nself time (share of busy):\n`);
  for (const [name, count] of summary.top) process.stdout.write(`  ${pct(count).padStart(6)}  ${name}\n`);
  process.stdout.write('\ninclusive (share of busy):\n');
  for (const [name, count] of summary.inclusive) process.stdout.write(`  ${pct(count).padStart(6)}  ${name}\n`);
  // Per request: the measured load's requests spread evenly over its duration (warm-up excluded).
  const windowMs = (seconds - 0.2) * 1000;
  const requests = (figures.rps * windowMs) / 1000;
  const { busyMicros, frames } = inclusiveFrames(profile, windowMs);
  process.stdout.write(`\ninclusive µs per request (busy ${(busyMicros / requests).toFixed(1)} µs/req, profiler on):\n`);
  for (const [name, micros] of frames.filter(([name]) => !/^\((root|program)\)/.test(name)).slice(0, 40)) {
    process.stdout.write(`  ${(micros / requests).toFixed(2).padStart(7)}  ${name}\n`);
  }
}

await main();
process.exit(0);

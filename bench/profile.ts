// CPU profile of one HTTP server under load: `npx tsx bench/profile.ts [check|gateway|rlf-check] [seconds] [hot] [seed] [prewarm]`.
// `seed`: us-east's four rules in one region (what the bench's http section runs) instead of the one per-key rule;
// `prewarm`: a fresh-key load first, as the bench runs before its hot-key row (the profile covers the last run only).
// Starts its own redis-server (and upstream for the gateway), runs the server under `node --cpu-prof` with the
// one-region seed rule (1,000 per minute per API key, token bucket), loads it with autocannon (fresh API key per
// request), and prints the top self-time entries plus the busy time under a few named frames.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { startRedis } from '../src/ops/redis-process.ts';
import { stopChild } from '../src/ops/stop-child.ts';
import { processCpuMicros, runLoad, startServer } from './lib/processes.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const SERVER = fileURLToPath(new URL('./http/server.ts', import.meta.url));
const target = (process.argv[2] ?? 'check') as 'check' | 'gateway' | 'rlf-check';
const seconds = Number(process.argv[3] ?? 5);
/** `hot`: one API key for every request (the seed rule then denies most of them) instead of a fresh key each. */
const flags = new Set(process.argv.slice(4));
const hot = flags.has('hot');
const seedRules = flags.has('seed');
const prewarm = flags.has('prewarm');

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url
    .replace(/^.*\/node_modules\//, '')
    .replace(/^.*\/(src|bench)\//, '$1/')
    .replace(/^file:\/\//, '');
  return `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`.trim();
}

/** Self time per frame and inclusive time under frames whose label matches one of `under`. */
export function summarise(
  profile: Profile,
  under: RegExp[],
  lastMs: number,
): { total: number; idle: number; top: [string, number][]; inclusive: [string, number][] } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  // Only the last `lastMs` of the profile (the measured load, not start-up and warm-up).
  const at: number[] = [];
  let clock = 0;
  for (const delta of profile.timeDeltas) at.push((clock += delta));
  const from = clock - lastMs * 1000;
  const selfCount = new Map<number, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    if (at[i]! < from) return;
    total++;
    selfCount.set(id, (selfCount.get(id) ?? 0) + 1);
  });
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let idle = 0;
  for (const [id, count] of selfCount) {
    const node = byId.get(id)!;
    const name = label(node);
    if (node.callFrame.functionName === '(idle)') {
      idle += count;
      continue;
    }
    self.set(name, (self.get(name) ?? 0) + count);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = label(byId.get(at)!);
      for (const pattern of under) {
        if (pattern.test(frame) && !seen.has(pattern.source)) {
          seen.add(pattern.source);
          inclusive.set(pattern.source, (inclusive.get(pattern.source) ?? 0) + count);
        }
      }
    }
  }
  return { total, idle, top: [...self].sort((a, b) => b[1] - a[1]).slice(0, 25), inclusive: [...inclusive].sort((a, b) => b[1] - a[1]) };
}

async function main(): Promise<void> {
  const redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), 'qf-prof-'));
  const upstream = target === 'gateway' ? await startServer('upstream') : undefined;
  const config = {
    region: 'us-east',
    rules: seedRules
      ? (parseYaml(readFileSync(new URL('../regions/us-east.yaml', import.meta.url), 'utf8')) as { rules: unknown[] }).rules
      : [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'tokenBucket', limit: 1000, period: '1m' }],
    ...(upstream ? { upstream: { url: upstream.url } } : {}),
  };
  // rlf-check: Hono + rate-limiter-flexible on the same route and body, for comparison.
  const [mode, options] =
    target === 'rlf-check' ? ['rlf-check', { redisUrl: redis.url, limit: 1000 }] : ['service', { redisUrl: redis.url, config }];
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
    method: target === 'gateway' ? 'GET' : 'POST',
    path: target === 'gateway' ? '/items' : '/v1/check',
    connections: 32,
    durationS: seconds,
  } as const;
  if (prewarm) await runLoad({ ...load, warmupS: 0, apiKeys: 10_000_000 });
  const cpuBefore = processCpuMicros(child.pid);
  const figures = await runLoad({ ...load, warmupS: 1, apiKeys: 1_000_000, ...(hot ? { apiKey: 'hot-key' } : {}) });
  const cpuAfter = processCpuMicros(child.pid);
  const cpuPerRequest = cpuBefore !== undefined && cpuAfter !== undefined ? (cpuAfter - cpuBefore) / figures.allRequests : NaN;
  await stopChild(child, 15_000);
  upstream && (await upstream.stop());
  await redis.stop();
  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  if (!file) throw new Error('no profile written');
  const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
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
      `server CPU ${cpuPerRequest.toFixed(1)} µs/req (profiler on); profile ${join(dir, file)}\n`,
  );
  process.stdout.write(`busy samples ${busy} of ${summary.total}\n\nself time (share of busy):\n`);
  for (const [name, count] of summary.top) process.stdout.write(`  ${pct(count).padStart(6)}  ${name}\n`);
  process.stdout.write('\ninclusive (share of busy):\n');
  for (const [name, count] of summary.inclusive) process.stdout.write(`  ${pct(count).padStart(6)}  ${name}\n`);
}

await main();
process.exit(0);

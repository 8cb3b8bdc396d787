// Soak: one region service (`quotafed serve`, its own process) under steady load from another process for a
// bounded time, with periodic Redis hiccups (CLIENT PAUSE longer than the command timeout, and a SIGKILL +
// restart). Samples the service's RSS and V8 heap and the live concurrency slots in Redis; fails when the heap
// grows after warm-up beyond a threshold or when slots are still held after the load stopped plus the lease TTL.
//
//   npm run soak                    # 3 minutes
//   npm run soak -- --minutes 10
//   npm run soak -- --quick         # 30 s
//
// Reports: reports/soak/soak.{json,md,svg} (soak-quick.* for --quick). Exit code 1 on a failed verdict.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { freePort, startRedis, type RedisProcess } from '../src/ops/redis-process.ts';
import { startServiceProcess, type ServiceProcess } from '../src/ops/service-process.ts';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const SELF = fileURLToPath(import.meta.url);
const LEASE_TTL_MS = 3_000;
const CONCURRENCY_RULE = 'in-flight';
/**
 * The service runs with a small old space on purpose: V8 then collects often, so the live set shows up in the
 * samples within seconds, and a leak ends in an out-of-memory crash instead of a slow drift past the run.
 */
const SERVICE_HEAP_MB = 128;

export interface SoakOptions {
  /** Load duration. */
  seconds: number;
  /** Requests per second the load process aims at. */
  rate: number;
  /** Time between samples. */
  sampleMs: number;
  /** Time between Redis hiccups (0: none). */
  hiccupEveryMs: number;
  /** Leading part of the run excluded from the memory verdict. */
  warmupMs: number;
  /** Allowed growth of the heap's live set (post-GC troughs) after warm-up. */
  maxHeapGrowthMb: number;
  /** Where the JSON, Markdown and SVG reports go; nothing is written when undefined. */
  outDir: string | undefined;
  /** Report file name stem. */
  name: string;
  log: (line: string) => void;
}

export interface Sample {
  /** Seconds since the load started (negative: before, larger than the duration: after). */
  t: number;
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  /** Unexpired concurrency leases in Redis (null when Redis was not answering). */
  liveSlots: number | null;
  localFallbackKeys: number;
  breakerOpen: boolean;
  /** Decisions since the previous sample, per second. */
  decisionsPerSec: number;
  phase: 'warmup' | 'load' | 'drain';
  event?: string;
}

export interface SoakResult {
  options: Omit<SoakOptions, 'log'>;
  startedAt: string;
  samples: Sample[];
  load: { requests: number; byOutcome: Record<string, number> };
  hiccups: string[];
  verdict: {
    ok: boolean;
    baselineHeapMb: number;
    finalHeapMb: number;
    heapGrowthMb: number;
    heapSlopeMbPerMin: number;
    rssStartMb: number;
    rssEndMb: number;
    leakedSlots: number | null;
    reasons: string[];
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10;

// ─── load process ────────────────────────────────────────────────────────────────────────────────────────────

/** The load generator's request mix by request number: distinct keys, hot keys, held leases, check + release. */
function requestFor(i: number): { kind: string; run: (base: string) => Promise<string> } {
  const slot = i % 20;
  const status = async (res: Response) => {
    await res.arrayBuffer();
    return String(res.status);
  };
  if (slot < 14) {
    // An API key never seen before: the service must not remember it.
    return {
      kind: 'distinct',
      run: (base) => fetch(`${base}/api/items/${i}`, { headers: { 'X-API-Key': `soak-${process.pid}-${i}` } }).then(status),
    };
  }
  if (slot < 16) return { kind: 'hot', run: (base) => fetch(`${base}/hot`, { headers: { 'X-API-Key': `hot-${i % 7}` } }).then(status) };
  if (slot < 19) return { kind: 'slow', run: (base) => fetch(`${base}/slow`, { headers: { 'X-API-Key': `conc-${i % 5}` } }).then(status) };
  return {
    kind: 'check-release',
    run: async (base) => {
      const res = await fetch(`${base}/v1/check`, {
        method: 'POST',
        body: JSON.stringify({ apiKey: `conc-${i % 5}`, method: 'GET', path: '/slow' }),
      });
      const decision = (await res.json()) as { allowed: boolean; leases: unknown[] };
      if (!decision.allowed) return 'denied';
      // One in ten callers never releases: its slot must come back through the lease TTL.
      if (i % 200 === 19) return 'abandoned';
      await sleep(20);
      const released = await fetch(`${base}/v1/release`, { method: 'POST', body: JSON.stringify({ leases: decision.leases }) });
      return `released ${released.status}`;
    },
  };
}

async function runLoad(base: string, seconds: number, rate: number, concurrency: number): Promise<void> {
  const end = Date.now() + seconds * 1_000;
  const interval = 1_000 / rate;
  let nextAt = performance.now();
  let next = 0;
  const byOutcome: Record<string, number> = {};
  const worker = async () => {
    while (Date.now() < end) {
      const at = nextAt;
      nextAt = Math.max(nextAt + interval, performance.now() - 1_000);
      const wait = at - performance.now();
      if (wait > 0) await sleep(wait);
      const i = next++;
      const request = requestFor(i);
      let outcome: string;
      try {
        outcome = await request.run(base);
      } catch (error) {
        outcome = `error ${(error as Error).name}`;
      }
      const label = `${request.kind} ${outcome}`;
      byOutcome[label] = (byOutcome[label] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  process.stdout.write(`${JSON.stringify({ requests: next, byOutcome })}\n`);
}

// ─── orchestration ───────────────────────────────────────────────────────────────────────────────────────────

async function startUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    // /slow holds its lease for a while, so concurrency slots are really in use.
    const delay = req.url?.startsWith('/slow') ? 25 : 0;
    setTimeout(() => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"ok":true}');
    }, delay);
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function serviceConfig(port: number, redisUrl: string, upstreamUrl: string): Record<string, unknown> {
  return {
    region: 'soak',
    port,
    logLevel: 'warn',
    redis: { url: redisUrl, commandTimeoutMs: 250, connectTimeoutMs: 1_000 },
    upstream: { url: upstreamUrl, timeoutMs: 5_000 },
    breaker: { failureThreshold: 5, probeIntervalMs: 200, successThreshold: 2, localFallback: true },
    rules: [
      {
        name: 'per-key',
        match: { identity: 'apiKey', endpoints: ['/api/*'] },
        by: ['apiKey'],
        algorithm: 'tokenBucket',
        limit: 600,
        period: '1m',
        failMode: 'open',
      },
      {
        name: 'hot',
        match: { identity: 'apiKey', endpoints: ['/hot'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: 5,
        period: '10s',
        failMode: 'open',
      },
      {
        name: CONCURRENCY_RULE,
        match: { identity: 'apiKey', endpoints: ['/slow'] },
        by: ['apiKey'],
        algorithm: 'concurrency',
        limit: 4,
        leaseTtl: LEASE_TTL_MS,
        failMode: 'closed',
      },
      {
        name: 'anonymous',
        match: { identity: 'anonymous' },
        by: ['ip'],
        algorithm: 'fixedWindow',
        limit: 100,
        period: '1m',
        failMode: 'closed',
      },
    ],
  };
}

function rssMb(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Math.round((Number(match[1]) / 1024) * 10) / 10 : 0;
  } catch {
    return 0;
  }
}

function metric(text: string, name: string): number {
  let total = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

/** Unexpired leases of the concurrency rule, at Redis's own clock. */
async function liveSlots(redis: Redis): Promise<number | null> {
  try {
    const [seconds, micros] = await redis.time();
    const now = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
    let cursor = '0';
    let total = 0;
    let rounds = 0;
    do {
      const [nextCursor, keys] = await redis.scan(cursor, 'MATCH', `qf:*:${CONCURRENCY_RULE}:*`, 'COUNT', 1_000);
      cursor = nextCursor;
      for (const key of keys) total += await redis.zcount(key, `(${now}`, '+inf');
    } while (cursor !== '0' && ++rounds < 10_000);
    return total;
  } catch {
    return null;
  }
}

function spawnLoad(base: string, seconds: number, rate: number): { done: Promise<SoakResult['load']>; pid: number | undefined } {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', SELF, '--role', 'load', '--url', base, '--seconds', String(seconds), '--rate', String(rate)],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const done = new Promise<SoakResult['load']>((resolveLoad, reject) => {
    child.once('exit', (code) => {
      const line = output.trim().split('\n').at(-1) ?? '';
      try {
        resolveLoad(JSON.parse(line) as SoakResult['load']);
      } catch {
        reject(new Error(`load process exited with ${code} and no summary: ${output.slice(-500)}`));
      }
    });
  });
  return { done, pid: child.pid };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.floor(sorted.length / 2)]!;
}

/** Least-squares slope (per minute) of y over t seconds. */
function slopePerMinute(points: Array<{ t: number; y: number }>): number {
  if (points.length < 2) return 0;
  const mt = points.reduce((s, p) => s + p.t, 0) / points.length;
  const my = points.reduce((s, p) => s + p.y, 0) / points.length;
  const num = points.reduce((s, p) => s + (p.t - mt) * (p.y - my), 0);
  const den = points.reduce((s, p) => s + (p.t - mt) ** 2, 0);
  return den === 0 ? 0 : (num / den) * 60;
}

export function judge(samples: Sample[], options: Pick<SoakOptions, 'maxHeapGrowthMb'>, leakedSlots: number | null): SoakResult['verdict'] {
  const load = samples.filter((s) => s.phase === 'load');
  const third = Math.max(1, Math.floor(load.length / 3));
  // The heap's live set is what a GC leaves: the lowest sample of a stretch, not its average.
  const baseline = Math.min(...load.slice(0, third).map((s) => s.heapUsedMb));
  const final = Math.min(...load.slice(-third).map((s) => s.heapUsedMb));
  const growth = Math.round((final - baseline) * 10) / 10;
  const reasons: string[] = [];
  if (load.length < 3) reasons.push(`only ${load.length} samples after warm-up`);
  if (growth > options.maxHeapGrowthMb) reasons.push(`heap live set grew ${growth} MB after warm-up (limit ${options.maxHeapGrowthMb} MB)`);
  if (leakedSlots === null) reasons.push('could not count concurrency slots after the load');
  else if (leakedSlots > 0) reasons.push(`${leakedSlots} concurrency slots still held after load stop + lease TTL`);
  return {
    ok: reasons.length === 0,
    baselineHeapMb: baseline,
    finalHeapMb: final,
    heapGrowthMb: growth,
    heapSlopeMbPerMin: Math.round(slopePerMinute(load.map((s) => ({ t: s.t, y: s.heapUsedMb }))) * 100) / 100,
    rssStartMb: median(load.slice(0, third).map((s) => s.rssMb)),
    rssEndMb: median(load.slice(-third).map((s) => s.rssMb)),
    leakedSlots,
    reasons,
  };
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const { log } = options;
  const dir = mkdtempSync(join(tmpdir(), 'quotafed-soak-'));
  let redis: RedisProcess | undefined;
  let upstream: Awaited<ReturnType<typeof startUpstream>> | undefined;
  let service: ServiceProcess | undefined;
  let inspector: Redis | undefined;
  try {
    redis = await startRedis();
    upstream = await startUpstream();
    const port = await freePort();
    const configPath = join(dir, 'soak.yaml');
    writeFileSync(configPath, stringify(serviceConfig(port, redis.url, upstream.url)));
    const env = {
      ...process.env,
      NODE_OPTIONS: [process.env.NODE_OPTIONS, `--max-old-space-size=${SERVICE_HEAP_MB}`].filter(Boolean).join(' '),
    };
    let crashed: string | undefined;
    service = await startServiceProcess({
      region: 'soak',
      configPath,
      port,
      root: ROOT,
      env,
      write: (line) => log(`  ${line}`),
      readyTimeoutMs: 30_000,
      onUnexpectedExit: (code, signal) => (crashed = `the service process exited during the run (code ${code}, signal ${signal})`),
    });
    inspector = new Redis(redis.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: () => 100 });
    inspector.on('error', () => undefined);
    const pid = service.pid!;
    log(`soak: service pid ${pid} on ${service.url}, Redis ${redis.url}, ${options.seconds} s at ${options.rate} req/s`);

    const samples: Sample[] = [];
    const hiccups: string[] = [];
    let lastDecisions = 0;
    let lastAt = performance.now();
    const startedAt = Date.now();
    let pendingEvent: string | undefined;
    const sample = async (phase: Sample['phase']): Promise<Sample> => {
      const text = await fetch(`${service!.url}/metrics`, { signal: AbortSignal.timeout(5_000) }).then(
        (r) => r.text(),
        () => '',
      );
      const decisions = metric(text, 'quotafed_decisions_total');
      const now = performance.now();
      const s: Sample = {
        t: Math.round((Date.now() - startedAt) / 100) / 10,
        rssMb: rssMb(pid),
        heapUsedMb: mb(metric(text, 'quotafed_nodejs_heap_size_used_bytes')),
        heapTotalMb: mb(metric(text, 'quotafed_nodejs_heap_size_total_bytes')),
        liveSlots: await liveSlots(inspector!),
        localFallbackKeys: metric(text, 'quotafed_local_fallback_keys'),
        breakerOpen: metric(text, 'quotafed_breaker_state') > 0,
        decisionsPerSec: Math.round((decisions - lastDecisions) / ((now - lastAt) / 1_000)),
        phase,
        ...(pendingEvent ? { event: pendingEvent } : {}),
      };
      pendingEvent = undefined;
      lastDecisions = decisions;
      lastAt = now;
      samples.push(s);
      log(
        `  t=${String(s.t).padStart(6)}s  ${phase.padEnd(6)} rss ${String(s.rssMb).padStart(6)} MB  heap ` +
          `${String(s.heapUsedMb).padStart(6)} MB  ` +
          `slots ${String(s.liveSlots ?? '?').padStart(3)}  ${String(s.decisionsPerSec).padStart(5)} ` +
          `dec/s${s.breakerOpen ? '  breaker OPEN' : ''}${s.event ? `  [${s.event}]` : ''}`,
      );
      return s;
    };

    const load = spawnLoad(service.url, options.seconds, options.rate);
    const loadEnd = Date.now() + options.seconds * 1_000;
    let nextSample = Date.now();
    let nextHiccup = options.hiccupEveryMs > 0 ? Date.now() + options.hiccupEveryMs : Infinity;
    let hiccupCount = 0;
    while (Date.now() < loadEnd) {
      if (Date.now() >= nextHiccup && loadEnd - Date.now() > 3_000) {
        hiccupCount += 1;
        // Alternate: Redis stops answering for longer than the command timeout, or dies and comes back empty.
        if (hiccupCount % 2 === 1) {
          pendingEvent = 'CLIENT PAUSE 1000 ms';
          await inspector.call('CLIENT', 'PAUSE', '1000', 'ALL').catch(() => undefined);
        } else {
          pendingEvent = 'Redis SIGKILL + restart';
          await redis.restart();
        }
        hiccups.push(`${Math.round((Date.now() - startedAt) / 1_000)} s: ${pendingEvent}`);
        nextHiccup += options.hiccupEveryMs;
      }
      if (Date.now() >= nextSample) {
        await sample(Date.now() - startedAt < options.warmupMs ? 'warmup' : 'load');
        nextSample += options.sampleMs;
      }
      await sleep(Math.max(10, Math.min(nextSample, nextHiccup, loadEnd) - Date.now()));
    }
    const loadResult = await load.done;
    log(`soak: load stopped after ${loadResult.requests} requests; waiting the lease TTL (${LEASE_TTL_MS} ms) for slots to drain`);
    await sleep(LEASE_TTL_MS + 1_000);
    const drained = await sample('drain');
    const verdict = judge(samples, options, drained.liveSlots);
    if (crashed) {
      verdict.reasons.push(crashed);
      verdict.ok = false;
    }
    const result: SoakResult = {
      options: {
        seconds: options.seconds,
        rate: options.rate,
        sampleMs: options.sampleMs,
        hiccupEveryMs: options.hiccupEveryMs,
        warmupMs: options.warmupMs,
        maxHeapGrowthMb: options.maxHeapGrowthMb,
        outDir: options.outDir,
        name: options.name,
      },
      startedAt: new Date(startedAt).toISOString(),
      samples,
      load: loadResult,
      hiccups,
      verdict,
    };
    if (options.outDir) writeReports(result, options.outDir, options.name);
    return result;
  } finally {
    inspector?.disconnect();
    await service?.stop(5_000);
    await upstream?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ─── reports ─────────────────────────────────────────────────────────────────────────────────────────────────

export function asciiChart(samples: Sample[], height = 12, width = 72): string {
  const points = samples.map((s) => s.heapUsedMb);
  const rss = samples.map((s) => s.rssMb);
  const max = Math.max(...points, ...rss, 1);
  const columns = Math.min(width, samples.length);
  const pick = (series: number[], c: number) => series[Math.floor((c * (series.length - 1)) / Math.max(1, columns - 1))]!;
  const rows: string[] = [];
  for (let r = height; r >= 1; r--) {
    const level = (max * r) / height;
    let line = '';
    for (let c = 0; c < columns; c++) {
      const heap = pick(points, c) >= level - max / height / 2 && pick(points, c) < level + max / height / 2;
      const res = pick(rss, c) >= level - max / height / 2 && pick(rss, c) < level + max / height / 2;
      line += heap ? 'h' : res ? 'r' : ' ';
    }
    rows.push(`${String(Math.round(level)).padStart(5)} MB |${line}`);
  }
  rows.push(`${' '.repeat(9)}+${'-'.repeat(columns)}`);
  rows.push(`${' '.repeat(10)}0 s${' '.repeat(Math.max(1, columns - 10))}${samples.at(-1)?.t ?? 0} s   (h heap used, r RSS)`);
  return rows.join('\n');
}

export function svgChart(result: SoakResult): string {
  const { samples } = result;
  const w = 760;
  const h = 320;
  const pad = { l: 56, r: 16, t: 28, b: 40 };
  const maxT = Math.max(...samples.map((s) => s.t), 1);
  const maxY = Math.ceil(Math.max(...samples.map((s) => Math.max(s.rssMb, s.heapTotalMb)), 10) / 10) * 10;
  const x = (t: number) => pad.l + (t / maxT) * (w - pad.l - pad.r);
  const y = (v: number) => h - pad.b - (v / maxY) * (h - pad.t - pad.b);
  const line = (pick: (s: Sample) => number, color: string) =>
    `<polyline fill="none" stroke="${color}" stroke-width="2" ` +
    `points="${samples.map((s) => `${x(s.t).toFixed(1)},${y(pick(s)).toFixed(1)}`).join(' ')}"/>`;
  const ticks = Array.from({ length: 6 }, (_, i) => (maxY * i) / 5);
  const warmupEnd = result.options.warmupMs / 1_000;
  const events = samples.filter((s) => s.event);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="sans-serif" font-size="11">`,
    `<rect width="${w}" height="${h}" fill="#fff"/>`,
    `<text x="${pad.l}" y="16" font-size="13">quotafed soak: service memory (${result.options.seconds} s at ${result.options.rate} ` +
      `req/s) — ${result.verdict.ok ? 'PASS' : 'FAIL'}</text>`,
    `<rect x="${x(0)}" y="${pad.t}" width="${Math.max(0, x(warmupEnd) - x(0))}" height="${h - pad.t - pad.b}" fill="#f2f2f2"/>`,
    ...ticks.map(
      (v) =>
        `<line x1="${pad.l}" x2="${w - pad.r}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/><text x="${pad.l - 6}" y="${y(v) + 4}" ` +
        `text-anchor="end">${Math.round(v)} MB</text>`,
    ),
    ...events.map((s) => `<line x1="${x(s.t)}" x2="${x(s.t)}" y1="${pad.t}" y2="${h - pad.b}" stroke="#e39" stroke-dasharray="3,3"/>`),
    line((s) => s.rssMb, '#1f77b4'),
    line((s) => s.heapTotalMb, '#9ecae1'),
    line((s) => s.heapUsedMb, '#d62728'),
    `<text x="${w / 2}" y="${h - 8}" text-anchor="middle">seconds (grey: warm-up; dashed: Redis hiccups)</text>`,
    `<text x="${w - pad.r}" y="${pad.t + 12}" text-anchor="end" fill="#1f77b4">RSS</text>`,
    `<text x="${w - pad.r}" y="${pad.t + 26}" text-anchor="end" fill="#9ecae1">heap total</text>`,
    `<text x="${w - pad.r}" y="${pad.t + 40}" text-anchor="end" fill="#d62728">heap used</text>`,
    '</svg>',
  ].join('\n');
}

export function markdownReport(result: SoakResult, svgName: string): string {
  const v = result.verdict;
  const rows = result.samples.map(
    (s) =>
      `| ${s.t} | ${s.phase} | ${s.rssMb} | ${s.heapUsedMb} | ${s.heapTotalMb} | ${s.liveSlots ?? '?'} | ${s.localFallbackKeys} | ` +
      `${s.breakerOpen ? 'open' : 'closed'} | ${s.decisionsPerSec} | ${s.event ?? ''} |`,
  );
  const outcomes = Object.entries(result.load.byOutcome)
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `| ${k} | ${n} |`);
  const { name, seconds } = result.options;
  const soakArgs = name === 'soak-quick' ? ' -- --quick' : seconds === 180 ? '' : ` -- --minutes ${seconds / 60}`;
  return [
    `# Soak run (${result.startedAt})`,
    '',
    `Service heap capped at ${SERVICE_HEAP_MB} MB old space (frequent GCs make the live set visible; a leak would crash it).`,
    '',
    `Command: \`npm run soak${soakArgs}\`. One region service (\`quotafed serve\`, own process) behind a`,
    `separate load process at ${result.options.rate} req/s for ${result.options.seconds} s; Redis hiccups every ` +
      `${result.options.hiccupEveryMs / 1_000} s;`,
    `warm-up ${result.options.warmupMs / 1_000} s.`,
    '',
    `**Verdict: ${v.ok ? 'PASS' : 'FAIL'}**${v.reasons.length ? ` — ${v.reasons.join('; ')}` : ''}`,
    '',
    '| measure | value |',
    '| --- | --- |',
    `| heap live set after warm-up (min of first third) | ${v.baselineHeapMb} MB |`,
    `| heap live set at the end (min of last third) | ${v.finalHeapMb} MB |`,
    `| growth (limit ${result.options.maxHeapGrowthMb} MB) | ${v.heapGrowthMb} MB |`,
    `| heap-used trend after warm-up (least squares) | ${v.heapSlopeMbPerMin} MB/min |`,
    `| RSS first third → last third (median) | ${v.rssStartMb} → ${v.rssEndMb} MB |`,
    `| concurrency slots held after load stop + lease TTL | ${v.leakedSlots ?? '?'} |`,
    `| requests sent (achieved rate) | ${result.load.requests} (${Math.round(result.load.requests / result.options.seconds)} req/s) |`,
    '',
    `![memory](${svgName})`,
    '',
    '```',
    asciiChart(result.samples),
    '```',
    '',
    '## Samples',
    '',
    '| t (s) | phase | RSS MB | heap used MB | heap total MB | live slots | local fallback keys | breaker | decisions/s | event |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    '## Load outcomes',
    '',
    '| request kind and outcome | count |',
    '| --- | --- |',
    ...outcomes,
    '',
    '## Hiccups',
    '',
    ...result.hiccups.map((h) => `- ${h}`),
    '',
  ].join('\n');
}

function writeReports(result: SoakResult, outDir: string, name: string): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `${name}.json`), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(outDir, `${name}.svg`), svgChart(result));
  writeFileSync(join(outDir, `${name}.md`), markdownReport(result, `${name}.svg`));
}

// ─── CLI ─────────────────────────────────────────────────────────────────────────────────────────────────────

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      role: { type: 'string' },
      url: { type: 'string' },
      seconds: { type: 'string' },
      rate: { type: 'string' },
      minutes: { type: 'string' },
      quick: { type: 'boolean', default: false },
      'max-heap-growth-mb': { type: 'string' },
      out: { type: 'string' },
    },
  });
  if (values.role === 'load') {
    await runLoad(values.url!, Number(values.seconds), Number(values.rate ?? 300), 16);
    return 0;
  }
  const seconds = values.quick ? 30 : Math.round(Number(values.minutes ?? 3) * 60);
  if (!Number.isFinite(seconds) || seconds < 10) throw new Error('--minutes must be at least 1/6');
  const name = values.quick ? 'soak-quick' : 'soak';
  const outDir = resolve(ROOT, values.out ?? 'reports/soak');
  const result = await runSoak({
    seconds,
    rate: Number(values.rate ?? 300),
    sampleMs: values.quick ? 2_000 : 5_000,
    hiccupEveryMs: values.quick ? 8_000 : 30_000,
    warmupMs: values.quick ? 8_000 : 30_000,
    maxHeapGrowthMb: Number(values['max-heap-growth-mb'] ?? 24),
    outDir,
    name,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`\n${asciiChart(result.samples)}\n\n`);
  const v = result.verdict;
  process.stdout.write(
    `heap live set ${v.baselineHeapMb} → ${v.finalHeapMb} MB (growth ${v.heapGrowthMb} MB, trend ${v.heapSlopeMbPerMin} MB/min), RSS ` +
      `${v.rssStartMb} → ${v.rssEndMb} MB, ` +
      `slots left ${v.leakedSlots}, ${result.load.requests} requests (${Math.round(result.load.requests / seconds)} req/s achieved)\n`,
  );
  process.stdout.write(`reports: ${join(outDir, `${name}.md`)} (.json, .svg)\n`);
  process.stdout.write(v.ok ? 'PASS\n' : `FAIL: ${v.reasons.join('; ')}\n`);
  return v.ok ? 0 : 1;
}

if (process.argv[1] && resolve(process.argv[1]) === SELF) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`soak failed: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(2);
    },
  );
}

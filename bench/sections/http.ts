// 2. HTTP: req/s and p50/p99 with autocannon in its own process against servers in their own processes.
// Each comparison measures its baseline right before it (the machine is shared and noisy), and ratios are
// taken within a pair.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { ConfigInput } from '../../src/config/schema.ts';
import type { Section } from '../lib/context.ts';
import { runLoad, startServer, warmUp, type ServerProcess, type WarmUpRun } from '../lib/processes.ts';
import { progress } from '../lib/progress.ts';
import { median, recordSpread, round } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';
import type { LoadFigures, LoadOptions } from '../http/load.ts';

const perKey = (limit: number): Omit<ConfigInput, 'redis'> => ({
  region: 'us-east',
  rules: [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit, period: '1m' }],
});

/** us-east's rules (the seed's policies, regions/us-east.yaml) in one region: no federation section. */
function seedRegion(): Omit<ConfigInput, 'redis'> {
  const file = parseYaml(readFileSync(new URL('../../regions/us-east.yaml', import.meta.url), 'utf8')) as ConfigInput;
  return { region: 'us-east', rules: file.rules };
}

/** "Fresh API key per request": more keys than any run sends. */
const FRESH_KEYS = 10_000_000;

const FIXED_RATE_CONNECTIONS = 8;

export const httpSection: Section = async (ctx) => {
  const durationS = ctx.options.quick ? 1 : 2.5;
  const warmupS = ctx.options.quick ? 0.3 : 0.5;
  const connections = 50;
  const redisUrl = ctx.redisServer.url;
  const servers: ServerProcess[] = [];
  const started = async (...args: Parameters<typeof startServer>) => {
    progress(`http: starting ${args[0]}${args[1]?.workers ? ` (${args[1].workers} workers)` : ''}`);
    const server = await startServer(...args);
    servers.push(server);
    return server;
  };
  const rounds = ctx.options.quick ? 1 : 2;
  const runs = new Map<string, { name: string; method: string; load: string; figures: LoadFigures[]; cpuPerRequest: number[] }>();
  const load = async (id: string, name: string, server: ServerProcess, method: 'GET' | 'POST', extra: Partial<LoadOptions> = {}) => {
    const url = server.url;
    const cpuBefore = server.cpuMicros();
    const path = extra.path ?? (method === 'POST' ? '/v1/check' : '/v1/items');
    progress(`http: ${name}${extra.overallRate ? ` at ${extra.overallRate} req/s` : ', saturation'} (${durationS} s)`);
    // autocannon paces a fixed rate per connection and fires the connections together, so a fixed rate over
    // 50 connections arrives in bursts of 50: fixed-rate runs use few connections to keep arrivals smooth.
    const conns = extra.overallRate ? FIXED_RATE_CONNECTIONS : connections;
    const figures = await runLoad({ url, method, path, connections: conns, durationS, warmupS, apiKeys: 10_000, ...extra });
    const cpuAfter = server.cpuMicros();
    const entry = runs.get(id) ?? {
      name,
      method: `${method} ${path}`,
      load: extra.overallRate ? `fixed ${extra.overallRate}/s, ${conns} conns` : `saturation, ${connections} conns`,
      figures: [],
      cpuPerRequest: [],
    };
    entry.figures.push(figures);
    // The server process's own CPU per request (the master only under node:cluster, so not shown there).
    if (cpuBefore !== undefined && cpuAfter !== undefined && figures.allRequests > 0)
      entry.cpuPerRequest.push((cpuAfter - cpuBefore) / figures.allRequests);
    runs.set(id, entry);
    return figures;
  };
  /** A ratio of req/s in each round (pairs measured back to back). */
  const perRound = (a: string, b: string) => runs.get(a)!.figures.map((figures, i) => figures.rps / runs.get(b)!.figures[i]!.rps);
  /** Median over rounds of a per-round ratio. */
  const ratio = (a: string, b: string) => round(median(perRound(a, b)));
  /** A target's ratio as a figure, its spread over the rounds beside it (section 7). */
  const recordRatio = (key: string, a: string, b: string) => {
    ctx.figures[key] = ratio(a, b);
    recordSpread(ctx.figures, key, perRound(a, b));
  };
  const p99Gap = () =>
    round(median(runs.get('check-half')!.figures.map((figures, i) => figures.p99Ms - runs.get('bare-post-half')!.figures[i]!.p99Ms)), 2);
  try {
    const upstream = await started('upstream');
    const withUpstream = (limit: number) => ({ ...perKey(limit), upstream: { url: upstream.url } });
    const seed = { ...seedRegion(), upstream: { url: upstream.url } };
    // Started together (start-up is mostly TypeScript loading); they idle while others are measured.
    // allSettled: when one fails, the others have still started and the finally below stops them.
    const startedAll = await Promise.allSettled([
      started('bare'),
      started('service', { redisUrl, config: seed }),
      started('rlf', { redisUrl }),
      started('middleware', { redisUrl }),
      started('bare-proxy', { upstreamUrl: upstream.url }),
      started('service', { redisUrl, config: withUpstream(10) }),
      started('service', { redisUrl, noCache: true, config: withUpstream(10) }),
      started('service', { redisUrl, workers: 2, config: seed }),
      started('rlf-check', { redisUrl, limit: 1000 }),
    ]);
    const failed = startedAll.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
    const [bare, service, rlf, middleware, bareProxy, abusive, abusiveNoCache, clustered, rlfCheck] = startedAll.map(
      (result) => (result as PromiseFulfilledResult<ServerProcess>).value,
    ) as ServerProcess[] as [
      ServerProcess,
      ServerProcess,
      ServerProcess,
      ServerProcess,
      ServerProcess,
      ServerProcess,
      ServerProcess,
      ServerProcess,
      ServerProcess,
    ];

    // Every server warms up alike before the first measured round (warmUp says why).
    const warmS = ctx.options.quick ? 0.5 : 2;
    const fresh = { apiKeys: FRESH_KEYS };
    const abuser = { apiKey: 'abuser', apiKeys: 1 };
    const warmups: WarmUpRun[] = [
      { server: bare, method: 'GET' },
      { server: rlf, method: 'GET' },
      { server: middleware, method: 'GET' },
      { server: bare, method: 'POST', extra: fresh },
      { server: rlfCheck, method: 'POST', extra: fresh },
      { server: service, method: 'POST', extra: fresh },
      { server: clustered, method: 'POST', extra: fresh },
      { server: bareProxy, method: 'GET', extra: fresh },
      { server: service, method: 'GET', extra: fresh },
      { server: abusive, method: 'GET', extra: abuser },
      { server: abusiveNoCache, method: 'GET', extra: abuser },
    ];
    progress(`http: warming every server up alike (${warmups.length} runs of ${warmS} s, not recorded)`);
    await warmUp(warmups, { durationS: warmS, connections });
    await ctx.admin.flushall();

    for (let r = 0; r < rounds; r++) {
      progress(`http: round ${r + 1}/${rounds}`);
      await ctx.admin.flushall();
      await load('bare-get', 'bare Hono', bare, 'GET');
      await load('rlf', 'Hono + rate-limiter-flexible middleware', rlf, 'GET');
      await load('middleware', 'Hono + quotafed middleware (Redis engine)', middleware, 'GET');

      // The /v1/check comparison: the same route and body, a fresh API key per request, then one hot key.
      const fresh = { apiKeys: FRESH_KEYS };
      const hot = { apiKey: 'hot-key', apiKeys: 1 };
      await load('bare-post', 'bare Hono (parses JSON, answers JSON)', bare, 'POST', fresh);
      await load('rlf-check', 'Hono + rate-limiter-flexible, fresh keys', rlfCheck, 'POST', fresh);
      const check = await load('check', 'quotafed /v1/check, fresh keys', service, 'POST', fresh);
      await load('rlf-check-hot', 'Hono + rate-limiter-flexible, one hot key', rlfCheck, 'POST', hot);
      await load('check-hot', 'quotafed /v1/check, one hot key', service, 'POST', hot);
      // The hot key's answer with no limiter: what HTTP, the body and /v1/check's documented answer cost alone.
      await load('bare-answer', "bare Hono writing /v1/check's answer for a denied key (no limiter)", bare, 'POST', {
        ...hot,
        path: '/v1/answer',
      });
      await load('check-cluster', 'quotafed /v1/check, node:cluster 2 workers, fresh keys', clustered, 'POST', fresh);

      await load('bare-proxy', 'bare Hono proxy to the upstream', bareProxy, 'GET', fresh);
      await load('gateway', 'quotafed gateway to the upstream, fresh keys', service, 'GET', fresh);

      await load('bare-get-2', 'bare Hono', bare, 'GET');
      await load('abusive', 'quotafed gateway, one abusive key over its limit (cache on)', abusive, 'GET', {
        apiKey: 'abuser',
        apiKeys: 1,
      });
      await load('abusive-nocache', 'quotafed gateway, one abusive key, over-limit cache off', abusiveNoCache, 'GET', {
        apiKey: 'abuser',
        apiKeys: 1,
      });

      // Limiter overhead at half of saturation: the same fixed rate against the bare handler and /v1/check.
      const rate = Math.max(100, Math.round(check.rps / 2 / 100) * 100);
      await load('bare-post-half', 'bare Hono (parses JSON, answers JSON)', bare, 'POST', { overallRate: rate, ...fresh });
      await load('check-half', 'quotafed /v1/check, fresh keys', service, 'POST', { overallRate: rate, ...fresh });
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
    await ctx.admin.flushall();
  }
  const rows: Row[] = [...runs].map(([id, entry]) => {
    const rps = median(entry.figures.map((figures) => figures.rps));
    const best = entry.figures.reduce((a, b) => (a.rps >= b.rps ? a : b));
    ctx.figures[`http.${id}.rps`] = rps;
    ctx.figures[`http.${id}.p99`] = median(entry.figures.map((figures) => figures.p99Ms));
    if (entry.cpuPerRequest.length > 0) ctx.figures[`http.${id}.cpuUs`] = median(entry.cpuPerRequest);
    return {
      server: entry.name,
      request: entry.method,
      load: entry.load,
      'req/s': Math.round(rps),
      'p50 ms': median(entry.figures.map((figures) => figures.p50Ms)),
      'p99 ms': median(entry.figures.map((figures) => figures.p99Ms)),
      statuses: Object.entries(best.statuses)
        .map(([code, count]) => `${code}: ${count}`)
        .join(', '),
      errors: entry.figures.reduce((sum, figures) => sum + figures.errors + figures.timeouts, 0),
      rounds: entry.figures.map((figures) => Math.round(figures.rps)).join(' / '),
      'server CPU µs/req': id.includes('cluster') || entry.cpuPerRequest.length === 0 ? null : round(median(entry.cpuPerRequest), 1),
    };
  });
  const cpuRatio = (a: string, b: string) => round(median(runs.get(a)!.cpuPerRequest) / median(runs.get(b)!.cpuPerRequest));
  const ratios: Row[] = [
    { comparison: 'quotafed /v1/check / Hono + rate-limiter-flexible, fresh keys', ratio: ratio('check', 'rlf-check') },
    { comparison: 'quotafed /v1/check / Hono + rate-limiter-flexible, one hot key', ratio: ratio('check-hot', 'rlf-check-hot') },
    {
      comparison: 'server CPU per request: rate-limiter-flexible / quotafed /v1/check, fresh keys (>1: quotafed cheaper)',
      ratio: cpuRatio('rlf-check', 'check'),
    },
    {
      comparison: 'server CPU per request: rate-limiter-flexible / quotafed /v1/check, one hot key (>1: quotafed cheaper)',
      ratio: cpuRatio('rlf-check-hot', 'check-hot'),
    },
    { comparison: 'quotafed /v1/check / bare Hono POST (stretch 0.85)', ratio: ratio('check', 'bare-post') },
    { comparison: 'Hono + rate-limiter-flexible / bare Hono POST', ratio: ratio('rlf-check', 'bare-post') },
    {
      comparison: "bare Hono writing /v1/check's answer / bare Hono POST (what the documented answer costs)",
      ratio: ratio('bare-answer', 'bare-post'),
    },
    {
      comparison: 'quotafed /v1/check, one hot key / bare Hono writing the same answer (what the limiter costs beyond it)',
      ratio: ratio('check-hot', 'bare-answer'),
    },
    { comparison: 'quotafed gateway / bare Hono proxy', ratio: ratio('gateway', 'bare-proxy') },
    { comparison: '/v1/check with node:cluster (2 workers) / one process', ratio: ratio('check-cluster', 'check') },
    { comparison: 'Hono + quotafed middleware / Hono + rate-limiter-flexible', ratio: ratio('middleware', 'rlf') },
    { comparison: 'Hono + rate-limiter-flexible / bare Hono GET', ratio: ratio('rlf', 'bare-get') },
    { comparison: 'abusive key from the over-limit cache / bare Hono GET', ratio: ratio('abusive', 'bare-get-2') },
    { comparison: 'abusive key, cache off / bare Hono GET', ratio: ratio('abusive-nocache', 'bare-get-2') },
    { comparison: 'p99 of /v1/check minus p99 of bare Hono, same fixed rate = half of /v1/check saturation (ms)', ratio: p99Gap() },
  ];
  recordRatio('http.checkOverRlf', 'check', 'rlf-check');
  recordRatio('http.checkHotOverRlf', 'check-hot', 'rlf-check-hot');
  recordRatio('http.checkOverBare', 'check', 'bare-post');
  recordRatio('http.gatewayOverProxy', 'gateway', 'bare-proxy');
  ctx.figures['http.abusiveOverBare'] = ratio('abusive', 'bare-get-2');
  ctx.figures['http.clusterOverSingle'] = ratio('check-cluster', 'check');
  recordRatio('http.middlewareOverRlf', 'middleware', 'rlf');
  ctx.figures['http.p99OverheadHalf'] = p99Gap();
  return [
    {
      id: 'http',
      title: `2. HTTP (autocannon 8 in its own process, ${connections} connections, ${durationS} s after a ${warmupS} s warm-up)`,
      columns: ['server', 'request', 'load', 'req/s', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'statuses', 'errors', 'rounds'],
      rows,
      notes: [
        'Servers and the upstream each run in their own process; this machine has 2 cores shared by the server, autocannon, redis-server ' +
          '(and the upstream on the gateway rows).',
        '"server CPU µs/req": the server process\'s user + system CPU time (/proc) over the warm-up and the run, per request answered; ' +
          'it excludes Redis and the load generator, and holds up on a busy machine far better than req/s. Not shown under node:cluster ' +
          '(the workers are other processes).',
      ],
    },
    {
      id: 'http-ratios',
      title: '2b. HTTP ratios (each against the baseline measured just before it; median of per-round ratios)',
      columns: ['comparison', 'ratio'],
      rows: ratios,
    },
  ];
};

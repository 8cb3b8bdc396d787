// 8. Envoy RLS: ShouldRateLimit decisions/s over gRPC beside POST /v1/check, against the same region service
// (its own process, one Redis) with an equivalent rule (fixed window, limit never reached, 10,000 keys). Each
// load generator runs in its own process: autocannon for /v1/check (as section 2), a grpc-js closed loop for
// gRPC. Pairs run back to back, and the ratio is taken within a round.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopChild } from '../../src/ops/stop-child.ts';
import type { GrpcLoadOptions } from '../grpc/load.ts';
import type { GrpcServerOptions } from '../grpc/server.ts';
import { HIGH_LIMIT, type Section } from '../lib/context.ts';
import { runLoad } from '../lib/processes.ts';
import { progress } from '../lib/progress.ts';
import { median, round } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';

const SERVER = fileURLToPath(new URL('../grpc/server.ts', import.meta.url));
const LOAD = fileURLToPath(new URL('../grpc/load.ts', import.meta.url));

function child(file: string, arg: object): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', file, JSON.stringify(arg)], { stdio: ['pipe', 'pipe', 'pipe'] });
}

function output(process_: ChildProcess, until: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => {
      process_.kill('SIGKILL');
      reject(new Error(`no output in ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    process_.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4_000)));
    process_.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      const match = until.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    process_.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code}) before ${until}: ${stderr}`));
    });
  });
}

interface Figures {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

export const grpcSection: Section = async (ctx) => {
  const durationS = ctx.options.quick ? 1 : 2.5;
  const warmupS = ctx.options.quick ? 0.3 : 0.5;
  const concurrency = 50;
  const serverOptions: GrpcServerOptions = {
    redisUrl: ctx.redisServer.url,
    config: {
      region: 'us-east',
      rules: [
        { name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: HIGH_LIMIT, period: '1m' },
        {
          name: 'rls-per-key',
          match: { envoy: { domain: 'bench', descriptor: [{ key: 'api_key' }] } },
          algorithm: 'fixedWindow',
          limit: HIGH_LIMIT,
          period: '1m',
        },
      ],
    },
  };
  progress('grpc: starting the region service with its gRPC listener');
  const server = child(SERVER, serverOptions);
  const rounds = ctx.options.quick ? 1 : 2;
  const check: Figures[] = [];
  const rls: Figures[] = [];
  try {
    const [, url, address] = await output(server, /READY (\S+) (\S+)/, 90_000);
    const grpcLoad = async (): Promise<Figures> => {
      const options: GrpcLoadOptions = {
        address: address!,
        domain: 'bench',
        descriptorKey: 'api_key',
        concurrency,
        durationS,
        warmupS,
        keys: 10_000,
      };
      const load = child(LOAD, options);
      const [line] = await output(load, /\{.*\}\n/, (durationS + warmupS) * 1000 + 30_000);
      const figures = JSON.parse(line) as Figures & { codes: Record<string, number> };
      if (figures.codes.OVER_LIMIT) throw new Error(`gRPC bench hit OVER_LIMIT ${figures.codes.OVER_LIMIT} times`);
      return figures;
    };
    for (let round_ = 0; round_ < rounds; round_++) {
      // Alternate the order so neither side always runs on a warmer (or busier) machine.
      const order = round_ % 2 === 0 ? (['check', 'rls'] as const) : (['rls', 'check'] as const);
      for (const which of order) {
        progress(`grpc: ${which === 'check' ? 'POST /v1/check (autocannon)' : 'ShouldRateLimit (grpc-js)'}, saturation, ${durationS} s`);
        if (which === 'check')
          check.push(
            await runLoad({ url: url!, method: 'POST', path: '/v1/check', connections: concurrency, durationS, warmupS, apiKeys: 10_000 }),
          );
        else rls.push(await grpcLoad());
      }
    }
  } finally {
    await stopChild(server, 15_000);
  }
  const ratio = round(median(rls.map((figures, i) => figures.rps / check[i]!.rps)));
  ctx.figures['grpc.rls.rps'] = median(rls.map((f) => f.rps));
  ctx.figures['grpc.check.rps'] = median(check.map((f) => f.rps));
  ctx.figures['grpc.rls_over_check'] = ratio;
  const row = (name: string, figures: Figures[], extra: Row = {}): Row => ({
    interface: name,
    'decisions/s': Math.round(median(figures.map((f) => f.rps))),
    'p50 ms': round(median(figures.map((f) => f.p50Ms)), 2),
    'p99 ms': round(median(figures.map((f) => f.p99Ms)), 2),
    errors: figures.reduce((sum, f) => sum + f.errors, 0),
    ...extra,
  });
  return [
    {
      id: 'grpc',
      title: '8. Envoy RLS (gRPC ShouldRateLimit) beside POST /v1/check, same service and Redis',
      columns: ['interface', 'decisions/s', 'p50 ms', 'p99 ms', 'errors', 'vs /v1/check'],
      rows: [
        row('POST /v1/check (autocannon, 50 connections)', check, { 'vs /v1/check': 1 }),
        row('ShouldRateLimit, 1 descriptor (grpc-js, 50 in flight, 1 channel)', rls, { 'vs /v1/check': ratio }),
      ],
      notes: [
        `Median of ${rounds} round(s) of ${durationS} s each, taken on a loaded shared machine (2 cores); the ratio is per round. The ` +
          `load generators differ (autocannon is leaner than a grpc-js client), so the gRPC figure includes more client cost.`,
      ],
    },
  ];
};

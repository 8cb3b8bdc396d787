// A load generator for /v1/check with one API key per request drawn from a distribution (bench/lib/key-draw.ts),
// in its own process: `tsx bench/lib/keyed-load.ts <json>`. Runs autocannon and prints one JSON line of figures.
import { createRequire } from 'node:module';
import type { AutocannonResult, LoadFigures } from '../http/load.ts';
import { keyDraw, type KeyDistribution } from './key-draw.ts';

// autocannon ships no types.
const autocannon = createRequire(import.meta.url)('autocannon') as (options: object) => Promise<unknown>;

export interface KeyedLoadOptions {
  url: string;
  connections: number;
  durationS: number;
  /** Fixed request rate over all connections (open loop); saturation when absent. */
  overallRate?: number;
  distribution: KeyDistribution;
  keys: number;
  /** Prefix of every API key (so a warm-up's keys are not the measured run's). */
  prefix: string;
  seed?: number;
}

/** What one keyed run reports: the HTTP load's figures, with the requests answered in the measured run. */
export type KeyedLoadFigures = Omit<LoadFigures, 'allRequests'> & {
  /** Requests answered. */
  requests: number;
};

const options = JSON.parse(process.argv[2]!) as KeyedLoadOptions;
// The bench holds our stdin open; if it dies, stop generating load at once.
process.stdin.resume();
process.stdin.once('end', () => process.exit(1));
const next = keyDraw({ distribution: options.distribution, keys: options.keys, seed: options.seed ?? 1 });

const result = (await autocannon({
  url: `${options.url}/v1/check`,
  connections: options.connections,
  duration: options.durationS,
  ...(options.overallRate ? { overallRate: options.overallRate } : {}),
  requests: [
    {
      method: 'POST',
      setupRequest: (request: Record<string, unknown>) => ({
        ...request,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ apiKey: `${options.prefix}${next()}`, method: 'GET', path: '/v1/items', ip: '10.0.0.1' }),
      }),
    },
  ],
})) as AutocannonResult;
const statuses: Record<string, number> = {};
for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = stat.count;
const figures: KeyedLoadFigures = {
  requests: result.requests.total,
  rps: result.requests.total / result.duration,
  p50Ms: result.latency.p50,
  p99Ms: result.latency.p99,
  statuses,
  errors: result.errors,
  timeouts: result.timeouts,
};
process.stdout.write(`${JSON.stringify(figures)}\n`);
process.exit(0);

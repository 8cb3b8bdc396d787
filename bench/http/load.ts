// The load generator, in its own process (the server gets its own core): `tsx bench/http/load.ts <json>`.
// Runs autocannon and prints one JSON line with the figures.
import { createRequire } from 'node:module';

// autocannon ships no types.
const autocannon = createRequire(import.meta.url)('autocannon') as (options: object) => Promise<unknown>;

export interface LoadOptions {
  url: string;
  method: 'GET' | 'POST';
  path: string;
  connections: number;
  durationS: number;
  warmupS: number;
  /** Fixed request rate over all connections (open loop); saturation when absent. */
  overallRate?: number;
  /** API keys to rotate over (Authorization: Bearer for GET; "apiKey" in the body for POST). */
  apiKeys: number;
  /** A fixed API key instead of rotating ones (the abusive caller). */
  apiKey?: string;
}

export interface LoadFigures {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
  errors: number;
  timeouts: number;
  /** Requests answered in the warm-up and the measured run together (for CPU per request). */
  allRequests: number;
}

const options = JSON.parse(process.argv[2]!) as LoadOptions;
// The bench holds our stdin open; if it dies, stop generating load at once.
process.stdin.resume();
process.stdin.once('end', () => process.exit(1));
let counter = 0;
const keyOf = () => options.apiKey ?? `http-key-${counter++ % options.apiKeys}`;

const run = (durationS: number) =>
  autocannon({
    url: `${options.url}${options.path}`,
    connections: options.connections,
    duration: durationS,
    ...(options.overallRate ? { overallRate: options.overallRate } : {}),
    requests: [
      {
        method: options.method,
        setupRequest: (request: Record<string, unknown>) => {
          const apiKey = keyOf();
          if (options.method === 'POST') {
            return {
              ...request,
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ apiKey, method: 'GET', path: '/v1/items', ip: '10.0.0.1' }),
            };
          }
          return { ...request, headers: { authorization: `Bearer ${apiKey}` } };
        },
      },
    ],
  }) as Promise<AutocannonResult>;

/** The part of autocannon's result the benches read (also bench/lib/keyed-load.ts). */
export interface AutocannonResult {
  requests: { total: number; average: number };
  latency: { p50: number; p99: number };
  duration: number;
  errors: number;
  timeouts: number;
  statusCodeStats?: Record<string, { count: number }>;
}

// autocannon has no warm-up phase of its own: a short run first, thrown away (JIT, connections, caches).
const warm = options.warmupS > 0 ? await run(options.warmupS) : undefined;
const result = await run(options.durationS);
const statuses: Record<string, number> = {};
for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = stat.count;
const figures: LoadFigures = {
  rps: result.requests.total / result.duration,
  p50Ms: result.latency.p50,
  p99Ms: result.latency.p99,
  statuses,
  errors: result.errors,
  timeouts: result.timeouts,
  allRequests: result.requests.total + (warm?.requests.total ?? 0),
};
process.stdout.write(`${JSON.stringify(figures)}\n`);
process.exit(0);

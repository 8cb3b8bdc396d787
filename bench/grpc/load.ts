// The gRPC load generator, in its own process: `tsx bench/grpc/load.ts <json>`. A closed loop of
// ShouldRateLimit calls (one descriptor each, rotating over `keys` descriptor values) on one grpc-js channel;
// prints one JSON line with the figures (the shape of bench/http/load.ts's).
import { createRlsClient } from '../../src/grpc/client.ts';
import { closedLoop } from '../lib/load.ts';

export interface GrpcLoadOptions {
  address: string;
  domain: string;
  descriptorKey: string;
  concurrency: number;
  durationS: number;
  warmupS: number;
  keys: number;
}

const options = JSON.parse(process.argv[2]!) as GrpcLoadOptions;
process.stdin.resume();
process.stdin.once('end', () => process.exit(1));
const client = createRlsClient(options.address);
await client.health();
const codes: Record<string, number> = {};
const result = await closedLoop(
  async (index) => {
    const response = await client.shouldRateLimit({
      domain: options.domain,
      descriptors: [{ entries: [{ key: options.descriptorKey, value: `grpc-key-${index % options.keys}` }] }],
    });
    codes[response.overall_code] = (codes[response.overall_code] ?? 0) + 1;
  },
  { concurrency: options.concurrency, durationMs: options.durationS * 1000, warmupMs: options.warmupS * 1000 },
);
client.close();
const summary = { rps: result.achievedPerSec, p50Ms: result.latency.p50Ms, p99Ms: result.latency.p99Ms, errors: result.errors, codes };
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(0);

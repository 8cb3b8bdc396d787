// A region service with its gRPC listener, in its own process: `tsx bench/grpc/server.ts <json>`.
// Prints `READY <http url> <grpc address>` when both listen, and stops on SIGTERM.
import { parseConfig } from '../../src/config/load.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { startRegionService } from '../../src/service.ts';

export interface GrpcServerOptions {
  redisUrl: string;
  config: Omit<ConfigInput, 'redis' | 'grpc' | 'port'>;
}

const options = JSON.parse(process.argv[2]!) as GrpcServerOptions;
// The bench holds our stdin open; when it goes away (even killed), stop rather than linger.
process.stdin.resume();
process.stdin.once('end', () => process.kill(process.pid, 'SIGTERM'));
const config = parseConfig(
  { logLevel: 'silent', ...options.config, port: 0, grpc: { port: 0 }, redis: { url: options.redisUrl, commandTimeoutMs: 2_000 } },
  'bench config',
);
const service = await startRegionService(config, { dashboard: false, federation: false });
process.stdout.write(`READY ${service.url} ${service.grpcAddress}\n`);
process.once('SIGTERM', () => {
  void service.close().then(() => process.exit(0));
});

// Child process of test/engine/tracing.test.ts: starts a region service on the given Redis with tracing on or off
// (argv: redisUrl, "on" | "off", collector URL when on), decides one /v1/check, stops, and prints the modules of
// @opentelemetry packages this process resolved (every import goes through the resolve hook registered first).
import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

const loaded: string[] = [];
const { port1, port2 } = new MessageChannel();
port1.on('message', (url: string) => loaded.push(url));
port1.unref();
register(
  `data:text/javascript,${encodeURIComponent(`let port;
export function initialize(data) { port = data.port; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  if (result.url.includes('/node_modules/@opentelemetry/')) port.postMessage(result.url);
  return result;
}`)}`,
  { data: { port: port2 }, transferList: [port2] },
);

const [redisUrl, mode, collector] = process.argv.slice(2);
const { parseConfig } = await import('../../src/config/load.ts');
const { startRegionService } = await import('../../src/service.ts');
const { silentLogger } = await import('../../src/log.ts');
const service = await startRegionService(
  parseConfig({
    region: 'probe',
    port: 0,
    logLevel: 'silent',
    redis: { url: redisUrl },
    ...(mode === 'on' ? { tracing: { otlpEndpoint: collector } } : {}),
    rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 5, period: '1m' }],
  }),
  { logger: silentLogger(), federation: false, dashboard: false },
);
const status = (
  await fetch(`${service.url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey: 'probe', method: 'GET', path: '/' }) })
).status;
await service.close();
// Let the hook thread's last messages arrive.
await new Promise((resolve) => setTimeout(resolve, 100));
console.log(JSON.stringify({ status, loaded: [...new Set(loaded.map((url) => /@opentelemetry\/[^/]+/.exec(url)![0]))].sort() }));
process.exit(0);

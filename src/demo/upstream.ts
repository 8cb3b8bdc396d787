// A tiny upstream for demos: answers every request with JSON describing it, so a curl through a regional
// gateway shows the request got through. Used by `npm start` (in-process) and docker-compose (as a process).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { pathToFileURL } from 'node:url';

export interface DemoUpstreamOptions {
  port?: number;
  host?: string;
  /** Reported in every answer; without it the `x-quotafed-region` request header, when present, is echoed. */
  region?: string;
}

export interface DemoUpstream {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

export const DEMO_UPSTREAM_PORT = 8090;

/** Header values are echoed, never trusted: cap them so a huge header cannot make a huge answer. */
function headerValue(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  const text = Array.isArray(value) ? value[0] : value;
  return text === undefined ? undefined : text.slice(0, 64);
}

function answer(request: IncomingMessage, response: ServerResponse, region: string | undefined): void {
  const url = new URL(request.url ?? '/', 'http://upstream.invalid');
  const body: Record<string, unknown> = { ok: true };
  const reportedRegion = region ?? headerValue(request, 'x-quotafed-region');
  if (reportedRegion !== undefined) body.region = reportedRegion;
  body.path = url.pathname;
  body.method = request.method ?? 'GET';
  const text = JSON.stringify(body);
  response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

export async function startDemoUpstream(options: DemoUpstreamOptions = {}): Promise<DemoUpstream> {
  const host = options.host ?? '127.0.0.1';
  const server = createServer((request, response) => {
    // Drain the body (if any) before answering, so keep-alive connections stay usable.
    request.resume();
    request.once('end', () => answer(request, response, options.region));
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? DEMO_UPSTREAM_PORT, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('demo upstream: no TCP address');
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function optionValue(argv: readonly string[], name: string): string | undefined {
  const index = argv.indexOf(name);
  return index === -1 ? undefined : argv[index + 1];
}

/** `node --import tsx src/demo/upstream.ts [--host 0.0.0.0] [--port 8090] [--region name]` (the compose service). */
async function main(argv: readonly string[]): Promise<void> {
  const portText = optionValue(argv, '--port') ?? process.env.DEMO_UPSTREAM_PORT;
  const port = portText === undefined ? DEMO_UPSTREAM_PORT : Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`demo upstream: bad port ${JSON.stringify(portText)}`);
  const upstream = await startDemoUpstream({
    port,
    host: optionValue(argv, '--host') ?? process.env.DEMO_UPSTREAM_HOST ?? '127.0.0.1',
    region: optionValue(argv, '--region') ?? process.env.DEMO_UPSTREAM_REGION,
  });
  process.stdout.write(`demo upstream listening on ${upstream.url}\n`);
  const stop = () => void upstream.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(1);
  });
}

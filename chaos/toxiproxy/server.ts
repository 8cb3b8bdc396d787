// A Toxiproxy-compatible server (HTTP API + TCP fault proxies) that Shopify's clients can drive unchanged.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { silentLogger } from '../../src/log.ts';
import { errorResponse, plainText, type ApiResponse } from './api/http.ts';
import { matchRoute } from './api/router.ts';
import { toxiproxyRoutes } from './api/routes.ts';
import { ProxyCollection } from './collection.ts';
import { ApiError } from './errors.ts';

export interface ToxiproxyServerOptions {
  /** Interface for the HTTP API; 127.0.0.1 when omitted. */
  host?: string;
  /** Port for the HTTP API; 0 (or omitted) picks a free one. */
  port?: number;
  logger?: Logger;
}

export interface ToxiproxyServer {
  /** Base URL for clients, e.g. `new Toxiproxy(server.url)`. */
  url: string;
  port: number;
  /** Closes every proxy, its connections and the API. */
  close(): Promise<void>;
}

/** Request bodies are a few proxies or toxics; anything near this is a mistake. */
const MAX_BODY_BYTES = 1 << 20;

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    request.on('data', (part: Buffer) => {
      size += part.length;
      if (size > MAX_BODY_BYTES) {
        reject(new ApiError(400, 'bad request body: http: request body too large'));
        request.destroy();
        return;
      }
      parts.push(part);
    });
    request.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    request.on('error', reject);
  });
}

/** API calls run one at a time, like the Go server's collection lock, so that binds and checks never interleave. */
function serialized(): <T>(task: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (task) => {
    const run = tail.then(task, task);
    tail = run.catch(() => undefined);
    return run;
  };
}

function send(response: ServerResponse, result: ApiResponse): void {
  const length = result.body === undefined ? 0 : Buffer.byteLength(result.body);
  response.writeHead(result.status, { ...result.headers, 'Content-Length': String(length) });
  response.end(result.body);
}

export async function startToxiproxyServer(options: ToxiproxyServerOptions = {}): Promise<ToxiproxyServer> {
  const host = options.host ?? '127.0.0.1';
  const logger = (options.logger ?? silentLogger()).child({ module: 'toxiproxy' });
  const proxies = new ProxyCollection(logger);
  const routes = toxiproxyRoutes(proxies);
  const exclusive = serialized();

  const handle = async (request: IncomingMessage): Promise<ApiResponse> => {
    // Browsers are refused so that a web page cannot drive the API (CSRF), as in Go.
    if ((request.headers['user-agent'] ?? '').startsWith('Mozilla/')) return plainText(403, 'User agent not allowed');
    const pathname = new URL(request.url ?? '/', 'http://toxiproxy').pathname;
    const match = matchRoute(routes, request.method ?? 'GET', pathname);
    if (match.kind === 'not-found') return plainText(404, '404 page not found');
    if (match.kind === 'method-not-allowed') return { status: 405 };
    const body = await readBody(request);
    return exclusive(async () => match.route.handler({ params: match.params, body }));
  };

  const server = createServer((request, response) => {
    const requestId = randomUUID();
    response.setHeader('X-Toxiproxy-Request-Id', requestId);
    handle(request)
      .catch((error: unknown) => {
        if (error instanceof ApiError) return errorResponse(error);
        logger.error({ err: error, requestId }, 'request failed');
        return errorResponse(new ApiError(500, (error as Error).message));
      })
      .then((result) => {
        logger.debug({ method: request.method, url: request.url, status: result.status, requestId }, 'api request');
        send(response, result);
      });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const urlHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  logger.info({ host, port }, 'toxiproxy API listening');

  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    close() {
      closing ??= (async () => {
        await exclusive(() => proxies.closeAll());
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closing;
    },
  };
}

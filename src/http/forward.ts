// Forwarding over node:http, for the gateway when it runs on Node's own server (@hono/node-server gives the
// handler Node's IncomingMessage and ServerResponse). The request's head and body go to the upstream on a
// keep-alive connection and the upstream's answer streams straight back to the client: no web Request,
// Response, Headers or ReadableStream per request, which fetch() and Hono's proxy() build (most of a proxied
// request's CPU in the gateway's profile, docs/performance.md). Bytes pass through as they are: a compressed
// answer stays compressed (proxy() asks the upstream for an uncompressed one instead).
import http, { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import https from 'node:https';

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, not the message: never forwarded in either
 * direction, nor the headers a Connection header names. Proxy-Authorization is a credential for this hop, and
 * Expect is answered by the server the client talks to (Node's, here).
 */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
  'expect',
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The header names a Connection header lists (lower case; names that are not tokens are ignored). */
export function connectionListed(connection: string | null | undefined): string[] {
  if (!connection) return [];
  const names: string[] = [];
  for (const name of connection.split(',')) {
    const trimmed = name.trim().toLowerCase();
    if (TOKEN.test(trimmed)) names.push(trimmed);
  }
  return names;
}

/** Why a forward ended without an upstream answer. */
export type ForwardFailure = 'timeout' | 'client-closed' | 'upstream-error';

/** A forward that ended without an answer: why, and the connection's error when there was one. */
export interface ForwardFailed {
  failure: ForwardFailure;
  error?: Error;
}

export interface ForwardRequest {
  /** Path and query on the upstream (the upstream URL's own path already prefixed). */
  path: string;
  /** Headers to send: the client's, hop-by-hop removed, X-Forwarded-* set. */
  headers: OutgoingHttpHeaders;
  /** Headers added to the answer, replacing the upstream's of the same name (the rate-limit headers). */
  answerHeaders: Record<string, string>;
  /** Called with the upstream answer's headers (lower-case names) before its head is written. */
  answered?: (headers: IncomingHttpHeaders) => void;
}

export interface Forwarder {
  /**
   * Sends `incoming` (method and body) to the upstream and streams its answer to `outgoing`. Resolves once the
   * answer's head is written, or with why when there is no answer to write (nothing written then).
   */
  forward(incoming: IncomingMessage, outgoing: ServerResponse, request: ForwardRequest): Promise<ForwardFailed | undefined>;
  close(): void;
}

/** The client's headers as the upstream gets them: hop-by-hop and Host removed (Node sets Host from the target). */
export function forwardedHeaders(source: IncomingHttpHeaders): OutgoingHttpHeaders {
  const drop = connectionListed(source.connection);
  const headers: OutgoingHttpHeaders = {};
  for (const name in source) {
    if (HOP_BY_HOP.has(name) || name === 'host' || drop.includes(name)) continue;
    const value = source[name];
    if (value !== undefined) headers[name] = value;
  }
  return headers;
}

/** The upstream's answer headers (raw pairs) without hop-by-hop ones, then `extra` in place of same-named ones. */
function answerHeaders(raw: readonly string[], extra: Record<string, string>): string[] {
  let drop: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'connection') drop = connectionListed(raw[i + 1]);
  const replaced = new Set(Object.keys(extra).map((name) => name.toLowerCase()));
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(lower) || replaced.has(lower) || drop?.includes(lower)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  for (const name in extra) out.push(name, extra[name]!);
  return out;
}

export function createForwarder(upstreamUrl: URL, timeoutMs: number): Forwarder {
  const secure = upstreamUrl.protocol === 'https:';
  const agent = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
  const send = secure ? https.request : http.request;
  const hostname = upstreamUrl.hostname.replace(/^\[|\]$/g, '');
  const port = upstreamUrl.port === '' ? undefined : Number(upstreamUrl.port);

  const forward = (incoming: IncomingMessage, outgoing: ServerResponse, request: ForwardRequest) =>
    new Promise<ForwardFailed | undefined>((resolve) => {
      let settled = false;
      const upstream = send({ agent, hostname, port, method: incoming.method, path: request.path, headers: request.headers });
      const fail = (failure: ForwardFailure, error?: Error) => {
        clearTimeout(timer);
        outgoing.off('close', clientClosed);
        upstream.destroy();
        if (!settled) {
          settled = true;
          resolve({ failure, error });
        }
      };
      // The client went away before the answer: nothing to wait for.
      const clientClosed = () => fail('client-closed');
      const timer = setTimeout(() => fail('timeout'), timeoutMs);
      outgoing.once('close', clientClosed);
      // `on`, not `once`: destroying the request (a timeout, the client gone) may raise an error of its own.
      upstream.on('error', (error) => fail('upstream-error', error));
      upstream.once('response', (answer) => {
        clearTimeout(timer);
        outgoing.off('close', clientClosed);
        settled = true;
        request.answered?.(answer.headers);
        outgoing.writeHead(answer.statusCode ?? 502, answer.statusMessage, answerHeaders(answer.rawHeaders, request.answerHeaders));
        // A client that leaves mid-answer closes the upstream connection too (it cannot be reused half-read).
        outgoing.once('close', () => {
          if (!answer.complete) answer.destroy();
        });
        // An upstream that dies mid-answer: the client must see a broken answer, not wait for the rest.
        answer.on('error', () => outgoing.destroy());
        answer.once('aborted', () => outgoing.destroy());
        answer.pipe(outgoing);
        resolve(undefined);
      });
      if (incoming.method === 'GET' || incoming.method === 'HEAD') {
        // A body on a GET or HEAD is not forwarded (as fetch() would not): nor is its length, or the upstream waits for it.
        upstream.removeHeader('content-length');
        upstream.end();
      } else incoming.pipe(upstream);
    });

  return { forward, close: () => agent.destroy() };
}

// Gateway mode: the request was admitted by the quotafed middleware; forward it to the upstream.
// Denied requests never get here. Upstream failures are the upstream's, so they become 502/504, not 500.
import type { Handler, MiddlewareHandler } from 'hono';
import { proxy } from 'hono/proxy';
import type { Logger } from '../log.ts';
import type { QuotafedEnv } from './env.ts';
import { clientIp, type IdentitySettings } from './identity.ts';
import { jsonError } from './json-error.ts';
import { canonicalRequestPath, invalidPath, type PathSettings } from './path.ts';

export interface GatewayOptions {
  upstreamUrl: string;
  timeoutMs: number;
  identity: IdentitySettings;
  logger: Logger;
}

/** Methods fetch() refuses to send (it throws), so they can never reach the upstream. */
const UNFORWARDABLE_METHODS: ReadonlySet<string> = new Set(['CONNECT', 'TRACE', 'TRACK']);

/** Answers those methods 405 before the limiter: the client's fault, not the upstream's, and no quota spent. */
export const refuseUnforwardable: MiddlewareHandler<QuotafedEnv> = async (c, next) => {
  if (UNFORWARDABLE_METHODS.has(c.req.method.toUpperCase())) return jsonError(405, 'Method not allowed');
  await next();
};

/**
 * Canonicalises the path before the limiter (rules match it) and the forward (the upstream gets exactly it);
 * a path without a canonical form is refused with 400. A canonical path the service itself owns (/HEALTHZ,
 * //v1/check…) is never forwarded: 404.
 */
export function canonicalizePath(settings: PathSettings, owned: (path: string) => boolean): MiddlewareHandler<QuotafedEnv> {
  return async (c, next) => {
    const path = canonicalRequestPath(c, settings);
    if (!path.ok) return invalidPath(path.reason);
    if (owned(path.path)) return jsonError(404, 'Not found');
    c.set('canonicalPath', path.path);
    await next();
  };
}

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) describe the client's connection to us, not ours to the upstream. fetch()
 * throws on some of them (Connection: upgrade, Upgrade), and Proxy-Authorization is a credential for this hop.
 */
const HOP_BY_HOP = [
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
];
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function stripHopByHop(headers: Headers): void {
  for (const name of (headers.get('connection') ?? '').split(',')) {
    const trimmed = name.trim();
    if (TOKEN.test(trimmed)) headers.delete(trimmed);
  }
  for (const name of HOP_BY_HOP) headers.delete(name);
}

export function gatewayHandler(options: GatewayOptions): Handler<QuotafedEnv> {
  const base = new URL(options.upstreamUrl);
  const basePath = base.pathname.replace(/\/$/, '');
  return async (c) => {
    const incoming = new URL(c.req.url);
    const target = new URL(base);
    // The canonical path the rules matched (canonicalizePath), never the client's spelling of it.
    target.pathname = `${basePath}${c.get('canonicalPath') ?? incoming.pathname}`;
    target.search = incoming.search;

    const headers = new Headers(c.req.raw.headers);
    stripHopByHop(headers);
    headers.delete('host');
    const ip = clientIp(c, options.identity);
    const prior = options.identity.trustForwardedFor ? headers.get('x-forwarded-for') : null;
    headers.set('x-forwarded-for', prior ? `${prior}, ${ip}` : ip);
    headers.set('x-forwarded-host', incoming.host);
    headers.set('x-forwarded-proto', incoming.protocol.replace(':', ''));

    // GET and HEAD carry no body: reading c.req.raw.body would make @hono/node-server build a full web Request.
    const method = c.req.method;
    const body = method === 'GET' || method === 'HEAD' ? null : c.req.raw.body;
    try {
      return await proxy(target, {
        method,
        headers,
        body,
        duplex: body ? 'half' : undefined,
        signal: AbortSignal.any([c.req.raw.signal, AbortSignal.timeout(options.timeoutMs)]),
      } as RequestInit & { duplex?: 'half' });
    } catch (error) {
      const name = (error as Error).name;
      if (name === 'TimeoutError') return jsonError(504, 'Upstream timed out');
      if (name === 'AbortError') return jsonError(499, 'Client closed request');
      options.logger.warn(
        { event: 'upstream.error', error: (error as Error).message, cause: String((error as Error).cause ?? '') },
        'upstream request failed',
      );
      return jsonError(502, 'Bad gateway');
    }
  };
}

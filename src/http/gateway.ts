// Gateway mode: the request was admitted by the quotafed middleware; forward it to the upstream.
// Denied requests never get here. Upstream failures are the upstream's, so they become 502/504, not 500.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context, Handler, MiddlewareHandler } from 'hono';
import { proxy } from 'hono/proxy';
import type { Logger } from '../log.ts';
import { HOP_BY_HOP, connectionListed, createForwarder, forwardedHeaders, type ForwardFailure } from './forward.ts';
import { rateLimitHeaders, type RuleLookup } from './headers.ts';
import type { QuotafedEnv } from './env.ts';
import { clientAddress, trustsForwarded, type IdentitySettings } from './identity.ts';
import { jsonError } from './json-error.ts';
import { canonicalRequestPath, invalidPath, type PathSettings } from './path.ts';

export interface GatewayOptions {
  upstreamUrl: string;
  timeoutMs: number;
  identity: IdentitySettings;
  logger: Logger;
  /** The rules in force, by name, for the rate-limit headers (headers.ts). */
  rules?: RuleLookup;
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

function stripHopByHop(headers: Headers): void {
  for (const name of connectionListed(headers.get('connection'))) headers.delete(name);
  for (const name of HOP_BY_HOP) headers.delete(name);
}

/** The error answers the gateway gives itself when the upstream does not answer. */
function failureResponse(failure: ForwardFailure): Response {
  if (failure === 'timeout') return jsonError(504, 'Upstream timed out');
  if (failure === 'client-closed') return jsonError(499, 'Client closed request');
  return jsonError(502, 'Bad gateway');
}

export function gatewayHandler(options: GatewayOptions): Handler<QuotafedEnv> {
  const base = new URL(options.upstreamUrl);
  const basePath = base.pathname.replace(/\/$/, '');
  const forwarder = createForwarder(base, options.timeoutMs);
  const logUpstreamError = (error: unknown) =>
    options.logger.warn(
      { event: 'upstream.error', error: (error as Error).message, cause: String((error as Error).cause ?? '') },
      'upstream request failed',
    );

  // X-Forwarded-For as the upstream gets it: the client's own chain only when we trust it, then the client's
  // address (in full: the IPv6 prefix is how rules key a client, not what the upstream should log).
  const trusted = trustsForwarded(options.identity);
  const forwardedFor = (c: Context<QuotafedEnv>, prior: string | undefined): string => {
    const ip = clientAddress(c, options.identity);
    return trusted && prior ? `${prior}, ${ip}` : ip;
  };

  // On Node's own server: straight from Node's request to Node's response (forward.ts).
  const viaNode = async (c: Context<QuotafedEnv>, incoming: IncomingMessage, outgoing: ServerResponse): Promise<Response> => {
    const url = incoming.url ?? '/';
    const query = url.indexOf('?');
    const path = `${basePath}${c.get('canonicalPath') ?? c.req.path}${query === -1 ? '' : url.slice(query)}`;
    const headers = forwardedHeaders(incoming.headers);
    const prior = incoming.headers['x-forwarded-for'];
    headers['x-forwarded-for'] = forwardedFor(c, Array.isArray(prior) ? prior.join(', ') : prior);
    headers['x-forwarded-host'] = incoming.headers.host ?? '';
    headers['x-forwarded-proto'] = (incoming.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
    const decision = c.get('quotafed');
    const answerHeaders = decision ? rateLimitHeaders(decision, Date.now(), { rules: options.rules }) : {};
    const answered = (upstream: IncomingHttpHeaders) => c.set('upstreamHeaders', upstream);
    const failed = await forwarder.forward(incoming, outgoing, { path, headers, answerHeaders, answered });
    if (failed === undefined) return RESPONSE_ALREADY_SENT;
    if (failed.failure === 'upstream-error') logUpstreamError(failed.error);
    return failureResponse(failed.failure);
  };

  return async (c) => {
    const { incoming, outgoing } = (c.env ?? {}) as Partial<HttpBindings> & { outgoing?: ServerResponse };
    // Node's body not read by anyone before us (nothing in the gateway's chain reads it).
    if (incoming && outgoing && !outgoing.headersSent && incoming.readableFlowing === null) return viaNode(c, incoming, outgoing);

    const incomingUrl = new URL(c.req.url);
    const target = new URL(base);
    target.pathname = `${basePath}${c.get('canonicalPath') ?? incomingUrl.pathname}`;
    target.search = incomingUrl.search;

    const headers = new Headers(c.req.raw.headers);
    stripHopByHop(headers);
    headers.delete('host');
    headers.set('x-forwarded-for', forwardedFor(c, headers.get('x-forwarded-for') ?? undefined));
    headers.set('x-forwarded-host', incomingUrl.host);
    headers.set('x-forwarded-proto', incomingUrl.protocol.replace(':', ''));

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
      if (name === 'TimeoutError') return failureResponse('timeout');
      if (name === 'AbortError') return failureResponse('client-closed');
      logUpstreamError(error);
      return failureResponse('upstream-error');
    }
  };
}

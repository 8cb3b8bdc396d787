// The limiter as a Hono middleware, for apps that embed it (`quotafed/hono`):
//
//   const { engine } = await createRegionEngine(loadConfigFile('regions/us-east.yaml'));   // or any DecisionEngine
//   app.use('/api/*', quotafed({ engine }));
//
// Denied requests get the 429 contract (or the binding rule's own `denial`) and never reach the handler; callers
// on the deny list get 403, callers on the allow list pass without a rule; allowed ones get the X-RateLimit-* and
// RateLimit headers on whatever the handler returns. Concurrency leases are released when the response body
// has been sent (or the client went away), not when the handler returns.
import type { ServerResponse } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';
import type { DecisionEngine, Lease, RequestContext } from '../engine/types.ts';
import { endpointOf } from '../engine/endpoint.ts';
import { parseReportedCost, type ReportedCost } from '../engine/cost-from-response.ts';
import { rejectionsTally } from '../metrics.ts';
import type { QuotafedEnv } from './env.ts';
import { listDeniedResponse, rateLimitedResponse, rulesOfEngine } from './denial.ts';
import { applyHeaders, costExceedsLimit, costExceedsLimitResponse, rateLimitHeaders, type RuleLookup } from './headers.ts';
import { DEFAULT_IDENTITY, identifyRequest, type IdentitySettings } from './identity.ts';
import { jsonError } from './json-error.ts';
import { DEFAULT_PATH_SETTINGS, canonicalRequestPath, invalidPath, type PathSettings } from './path.ts';
import { answerTurn } from './answer-turn.ts';

/**
 * Options of the {@link quotafed} middleware: the engine that decides, and how a request becomes a
 * {@link RequestContext} (by default the API key headers, the client IP and the canonical path).
 *
 * @example
 * ```ts
 * // Behind a trusted proxy, anonymous callers refused:
 * app.use('/api/*', quotafed({ engine, identity: { trustForwardedFor: true, anonymous: 'reject' } }));
 *
 * // Or the identity from your own auth; returning a Response answers without deciding:
 * app.use('/tenants/*', quotafed({
 *   engine,
 *   identify: (c) => {
 *     const tenant = c.req.header('x-tenant');
 *     return tenant ? { apiKey: tenant, ip: '', method: c.req.method, path: c.req.path } : c.json({ error: 'no tenant' }, 401);
 *   },
 * }));
 * ```
 */
export interface QuotafedOptions {
  /** Decides each request: `createRegionEngine(config).engine`, `createRedisEngine(...)` or your own. */
  engine: DecisionEngine;
  /** Build the request context yourself (return a Response to answer without deciding, e.g. a 401). */
  identify?: (c: Context) => RequestContext | Response | Promise<RequestContext | Response>;
  /** Settings of the default identify (API key headers, client IP). */
  identity?: Partial<IdentitySettings>;
  /** How the default identify canonicalises the path rules match (src/http/path.ts); lower case, no trailing slash. */
  paths?: PathSettings;
  /**
   * The rules in force, by name (ruleLookup): a token bucket's RateLimit-Policy then states its refill rate, and a
   * rule's `denial` answers its denials. Without it the denials are read from the engine's config when it has one
   * (the region engine).
   */
  rules?: RuleLookup;
  /** The clock for the reset headers (epoch ms); `Date.now` when omitted. */
  now?: () => number;
}

/**
 * A body that calls `done` exactly once: when fully read, on error, or when the client cancels. The middleware
 * wraps a response body with it to release concurrency leases when the body has been sent.
 *
 * @example
 * ```ts
 * const body = releaseWhenDone(response.body!, () => void engine.release(decision.leases));
 * return new Response(body, response);
 * ```
 */
export function releaseWhenDone(body: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  let released = false;
  const finish = () => {
    if (released) return;
    released = true;
    done();
  };
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done: ended } = await reader.read();
        if (ended) {
          finish();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        finish();
        controller.error(error);
      }
    },
    async cancel(reason) {
      finish();
      await reader.cancel(reason).catch(() => undefined);
    },
  });
}

/** Sets `headers` on a response's own headers; false when they are immutable (a fetch() response's). */
function setInPlace(target: Headers, headers: Record<string, string>): boolean {
  try {
    applyHeaders(target, headers);
    return true;
  } catch (error) {
    if (error instanceof TypeError) return false;
    throw error;
  }
}

/** The header @hono/node-server's RESPONSE_ALREADY_SENT carries: the handler wrote Node's response itself. */
const ALREADY_SENT_HEADER = 'x-hono-already-sent';

/**
 * The limiter as Hono middleware. Each request is identified, decided by `options.engine` and either answered
 * with the 429 contract (the handler never runs) or passed on; the handler's response gets the `X-RateLimit-*`
 * and `RateLimit` headers, and later handlers read the decision with `c.get('quotafed')`. Concurrency leases
 * are released when the response body has been sent or the client went away.
 *
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { loadConfigFile } from 'quotafed/engine';
 * import { quotafed, type QuotafedEnv } from 'quotafed/hono';
 * import { createRegionEngine } from 'quotafed/service';
 *
 * const { engine } = await createRegionEngine(loadConfigFile('regions/us-east.yaml'));
 * const app = new Hono<QuotafedEnv>();
 * app.use('/api/*', quotafed({ engine }));
 * app.get('/api/search', (c) => c.json({ remaining: c.get('quotafed').binding?.remaining }));
 * ```
 */
export function quotafed(options: QuotafedOptions): MiddlewareHandler<QuotafedEnv> {
  const settings: IdentitySettings = { ...DEFAULT_IDENTITY, ...options.identity };
  const now = options.now ?? Date.now;
  const paths = options.paths ?? DEFAULT_PATH_SETTINGS;
  const headerOptions = { rules: options.rules };
  const denialOptions = { rules: options.rules, denials: options.rules ?? rulesOfEngine(options.engine) };
  const identify =
    options.identify ??
    ((c: Context) => {
      const identity = identifyRequest(c, settings);
      if (!identity.ok) return jsonError(identity.status, identity.reason);
      // Rules match the canonical path, so no spelling of a path skips them.
      const path = canonicalRequestPath(c, paths);
      return path.ok ? { ...identity.request, path: path.path } : invalidPath(path.reason);
    });

  return async (c, next) => {
    // The default identify answers at once: no await (a microtask) unless a custom one returns a promise.
    const pending = identify(c);
    const identified = typeof (pending as { then?: unknown }).then === 'function' ? await pending : (pending as RequestContext | Response);
    if (identified instanceof Response) return identified;
    const decision = await options.engine.decide(identified);
    const turn = answerTurn(decision);
    if (turn !== undefined) await turn;
    c.set('quotafed', decision);

    if (!decision.allowed) {
      // On the deny list: 403 with the reason; no rule was asked.
      if (decision.list?.list === 'deny') return listDeniedResponse(decision.list);
      // A cost above a rule's limit can never pass: a 422 with the reason, not a 429 inviting a retry.
      const cost = identified.cost ?? 1;
      const impossible = costExceedsLimit(decision, cost);
      if (impossible) return costExceedsLimitResponse(decision, impossible, cost, now(), headerOptions);
      rejectionsTally.add({ endpoint: endpointOf(decision) });
      return rateLimitedResponse(decision, now(), denialOptions);
    }

    const release = (leases: readonly Lease[]) => {
      if (leases.length > 0) void options.engine.release(leases).catch(() => undefined);
    };
    let handedOff = false;
    try {
      await next();
      const res = c.res;
      // Rules that count only failed (or only successful) answers: refund what this answer is not, once known; and
      // costFromResponse rules: refund what they reserved beyond the cost the answer's header reports.
      if (decision.refund !== undefined && options.engine.settleResponse !== undefined) {
        const alreadySent = res.headers.has(ALREADY_SENT_HEADER);
        const sent = alreadySent ? (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing : undefined;
        // Written straight to Node's response (the gateway, forward.ts): the upstream's headers are on the context.
        const header = alreadySent ? (name: string) => c.get('upstreamHeaders')?.[name] : (name: string) => res.headers.get(name);
        const reported: ReportedCost = (rule) =>
          rule.costFromResponse ? parseReportedCost(header(rule.costFromResponse.header)) : undefined;
        void options.engine.settleResponse(decision, sent?.statusCode ?? res.status, reported).catch(() => undefined);
      }
      // Written straight to Node's response (the gateway on Node, forward.ts), rate-limit headers included:
      // leases are released when that response closes.
      if (res.headers.has(ALREADY_SENT_HEADER)) {
        const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
        if (outgoing && !outgoing.closed && decision.leases.length > 0) {
          outgoing.once('close', () => release(decision.leases));
          handedOff = true;
        }
        return;
      }
      // Informational and upgrade responses cannot be rebuilt (and carry no rate-limit headers).
      if (res.status < 200 || res.status > 599) return;
      const limitHeaders = rateLimitHeaders(decision, now(), headerOptions);
      // Without a lease to release at the end of the body, the headers go on the handler's own response: its body
      // is left alone, so @hono/node-server still writes a string body with its head in one write (rebuilding the
      // response turned it into a stream: two writes and a web Response per request).
      if (decision.leases.length === 0 && setInPlace(res.headers, limitHeaders)) return;
      const headers = new Headers(res.headers);
      applyHeaders(headers, limitHeaders);
      let body: ReadableStream<Uint8Array> | null = res.body;
      if (body && decision.leases.length > 0) {
        body = releaseWhenDone(body, () => release(decision.leases));
        handedOff = true;
      }
      // A fresh Response: fetch() responses (the proxied upstream) have immutable headers.
      c.res = undefined;
      c.res = new Response(body as BodyInit | null, { status: res.status, statusText: res.statusText, headers });
    } finally {
      if (!handedOff) release(decision.leases);
    }
  };
}

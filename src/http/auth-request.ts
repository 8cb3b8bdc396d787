// GET /v1/auth: the decision shaped for a gateway's auth subrequest. nginx's auth_request sends the client's
// headers (Authorization / X-API-Key) plus the original request line and client address:
//   X-Original-URI: /checkout?x=1   X-Original-Method: POST   X-Real-IP: 203.0.113.7 (else X-Forwarded-For, if trusted)
// Traefik's ForwardAuth and Caddy's forward_auth send the same as X-Forwarded-Uri and X-Forwarded-Method (the
// X-Original-* pair wins when both are present). quotafed answers:
//   204  allowed, with the rate-limit headers (src/http/headers.ts)
//   403  over the limit (nginx): the same headers plus Retry-After and the binding rule's denial body; auth_request
//        accepts only 2xx, 401 and 403, so nginx's error_page maps it to the client-facing 429 (docs/nginx.md)
//   429  over the limit (Traefik, Caddy): they hand a non-2xx answer to the client as it is; a rule's `denial`
//        sets this status, body and content type
//   403  on the deny list (both): a JSON reason and X-Quotafed-List: deny, which nginx's template answers as 403
//   401  no usable API key (identity.anonymous: reject, or an oversized key)
//   400  not an auth subrequest (missing or invalid original URI / method)
// The identity is read by the gateway's own functions (identity.ts) and the rules by the same engine.
import { canonicalPath, invalidPath, type PathSettings } from './path.ts';
import type { Hono } from 'hono';
import { isIP } from 'node:net';
import type { DecisionEngine, RequestContext } from '../engine/types.ts';
import { OTHER_ENDPOINT, rejectionsTally } from '../metrics.ts';
import { tokenMatches } from './admin.ts';
import type { QuotafedEnv } from './env.ts';
import { LIST_HEADER, denialOf, listDeniedResponse } from './denial.ts';
import { rateLimitHeaders, type RuleLookup } from './headers.ts';
import { apiKeyFromHeaders, clientAddress, ipKey, ipv6PrefixOf, type IdentitySettings } from './identity.ts';
import { jsonError } from './json-error.ts';
import { answerTurn } from './answer-turn.ts';

export const AUTH_REQUEST_PATH = '/v1/auth';
/** With admin.protectCheck, nginx presents the admin token here (the client's Authorization is its API key). */
export const AUTH_TOKEN_HEADER = 'x-quotafed-token';

const METHOD = /^[A-Za-z]{1,16}$/;

export interface AuthRequestOptions {
  engine: DecisionEngine;
  identity: IdentitySettings;
  /** admin.token when admin.protectCheck is set: the subrequest must carry it in X-Quotafed-Token. */
  requireToken?: string | undefined;
  /** Rules match the canonical form of X-Original-URI's path, as for the gateway (src/http/path.ts). */
  paths?: PathSettings;
  /** The rules in force, by name, for the rate-limit headers (headers.ts). */
  rules?: RuleLookup;
  now?: () => number;
}

export function registerAuthRequestRoute(app: Hono<QuotafedEnv>, options: AuthRequestOptions): void {
  const now = options.now ?? Date.now;
  app.get(AUTH_REQUEST_PATH, async (c) => {
    if (options.requireToken !== undefined && !tokenMatches(c.req.header(AUTH_TOKEN_HEADER), options.requireToken)) {
      // Not 401/403: those would reach the client as an auth answer; nginx logs this as a failed subrequest.
      return jsonError(400, 'missing or wrong X-Quotafed-Token');
    }
    const original = c.req.header('x-original-uri');
    // Traefik and Caddy name the original request X-Forwarded-Uri / X-Forwarded-Method.
    const forwardAuth = original === undefined && c.req.header('x-forwarded-uri') !== undefined;
    const uri = forwardAuth ? c.req.header('x-forwarded-uri') : original;
    const method = c.req.header('x-original-method') ?? c.req.header('x-forwarded-method');
    if (uri === undefined || !uri.startsWith('/') || uri.length > 4096)
      return jsonError(
        400,
        'X-Original-URI (or X-Forwarded-Uri) must carry the original request URI (proxy_set_header X-Original-URI $request_uri)',
      );
    if (method === undefined || !METHOD.test(method))
      return jsonError(
        400,
        'X-Original-Method (or X-Forwarded-Method) must carry the original method (proxy_set_header X-Original-Method $request_method)',
      );

    // No spelling skips a rule: match on the canonical path. A path without one gets 400, which nginx turns into
    // a 500 for the client (auth_request passes only 2xx, 401 and 403); docs/nginx.md says so.
    const canonical = canonicalPath(uri.split(/[?#]/, 1)[0]!, options.paths);
    if (!canonical.ok) return invalidPath(canonical.reason);
    const key = apiKeyFromHeaders(c.req.header('authorization'), c.req.header('x-api-key'), options.identity);
    if (!key.ok) return jsonError(401, key.reason);
    const realIp = c.req.header('x-real-ip')?.trim();
    const address = realIp && isIP(realIp) ? realIp : clientAddress(c, options.identity);
    const request: RequestContext = {
      apiKey: key.apiKey,
      ip: ipKey(address, ipv6PrefixOf(options.identity)),
      address,
      method: method.toUpperCase(),
      path: canonical.path,
    };
    const decision = await options.engine.decide(request);
    await answerTurn(decision);
    // On the deny list: 403 in both modes, marked so nginx answers the client 403 and not its 429 (docs/nginx.md).
    if (decision.list?.list === 'deny') return listDeniedResponse(decision.list);
    // nginx sends no completion for the original request: concurrency leases go back at once.
    if (decision.leases.length > 0) void options.engine.release(decision.leases).catch(() => undefined);
    const headers = new Headers(rateLimitHeaders(decision, now(), { rules: options.rules }));
    if (decision.allowed) {
      if (decision.list) headers.set(LIST_HEADER, 'allow');
      return new Response(null, { status: 204, headers });
    }
    rejectionsTally.add({ endpoint: (decision as { endpoint?: string }).endpoint ?? OTHER_ENDPOINT });
    if (!headers.has('Retry-After')) headers.set('Retry-After', '1');
    // The binding rule's denial: Traefik and Caddy hand it to the client as it is; nginx needs a 403 (auth_request
    // passes only 2xx, 401 and 403) and answers the client from its own template.
    const answer = denialOf(decision, now(), options.rules);
    headers.set('Content-Type', answer.contentType);
    return new Response(answer.body, { status: forwardAuth ? answer.status : 403, headers });
  });
}

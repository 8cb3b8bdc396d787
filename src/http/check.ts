// POST /v1/check: the gateway's decision as JSON, for sidecars and internal callers that bypass the gateway.
// The response carries the same rate-limit headers; `status` says what the caller should answer its client.
// POST /v1/release returns concurrency leases taken by a check, and settles an admission once the caller knows
// its answer (the `settle` token of the check, with the answer's status and the cost it reported).
import type { Context, Hono } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { z } from 'zod';
import type { Decision, DecisionEngine, Lease, RequestContext } from '../engine/types.ts';
import { keyLayout, STATE_KEY_PATTERN, type KeyLayout } from '../keys.ts';
import { LIST_DENIED_STATUS, listDeniedReason } from './denial.ts';
import type { QuotafedEnv } from './env.ts';
import {
  COST_EXCEEDS_LIMIT_STATUS,
  costExceedsLimit,
  costExceedsLimitReason,
  degradedSource,
  rateLimitHeaders,
  regionRemainingOf,
  remainingOf,
  type RuleLookup,
} from './headers.ts';
import { checkApiKey, clientAddress, ipKey, ipv6PrefixOf, type IdentitySettings } from './identity.ts';
import { jsonError } from './json-error.ts';
import { DEFAULT_PATH_SETTINGS, canonicalPath, pathBytes, type PathSettings } from './path.ts';
import { readBodyText } from './read-body.ts';
import type { SettleTokens } from './settle-token.ts';
import type { Rule } from '../config/schema.ts';
import { answerTurn } from './answer-turn.ts';

export const CHECK_BODY_LIMIT_BYTES = 16 * 1024;

export function checkBodySchema(identity: IdentitySettings, paths: PathSettings = DEFAULT_PATH_SETTINGS) {
  return z.strictObject({
    apiKey: z
      .string()
      .refine((key) => Buffer.byteLength(key, 'utf8') <= identity.maxApiKeyBytes, {
        error: `API key longer than ${identity.maxApiKeyBytes} bytes`,
      })
      .optional(),
    ip: z
      .string()
      .refine((ip) => isIP(ip) !== 0, { error: 'expected an IPv4 or IPv6 address' })
      .optional(),
    method: z
      .string()
      .regex(/^[A-Za-z]{1,16}$/, { error: 'expected an HTTP method such as "GET"' })
      .transform((method) => method.toUpperCase()),
    path: z
      .string()
      .startsWith('/', { error: 'expected a path starting with "/"' })
      .max(4096)
      // The canonical form the gateway matches and forwards (src/http/path.ts); no spelling skips a rule.
      .transform((path, ctx) => {
        const canonical = canonicalPath(pathBytes(path), paths);
        if (canonical.ok) return canonical.path;
        ctx.addIssue({ code: 'custom', message: canonical.reason });
        return z.NEVER;
      }),
    cost: z.number().int().positive().max(1_000_000).optional(),
    /** false: answer what the decision would be and spend nothing (RequestContext.peek). */
    consume: z.boolean().optional(),
  });
}

const ReleaseBody = z.strictObject({
  leases: z
    .array(
      z.strictObject({
        key: z.string().regex(STATE_KEY_PATTERN, { error: 'not a quotafed lease key' }),
        id: z.string().min(1).max(128),
        slots: z.number().int().positive().max(1_000_000),
      }),
    )
    .max(100)
    .default([]),
  /**
   * The answer to a checked request is known: the check's `settle` token, the answer's status (countResponses) and
   * the cost it reported (costFromResponse; omitted: the whole reserve stays charged).
   */
  settle: z
    .strictObject({
      token: z.string().min(1).max(8_192),
      status: z.number().int().min(100).max(599).default(200),
      cost: z.number().int().min(0).max(1_000_000_000).optional(),
    })
    .optional(),
});

export type CheckBody = z.output<ReturnType<typeof checkBodySchema>>;

/**
 * The request a /v1/check body stands for (also what POST /admin/keys/reset clears): the API key as the
 * identity settings accept it, the client IP (the body's, keyed by the IPv6 prefix, else the caller's own
 * address: a sidecar per client), method, canonical path, cost and whether it only peeks. Not ok when the API
 * key is refused (its status and reason).
 */
export function checkRequest(
  c: Context,
  data: CheckBody,
  identity: IdentitySettings,
): { ok: true; request: RequestContext } | { ok: false; status: number; reason: string } {
  const key = checkApiKey(data.apiKey, identity);
  if (!key.ok) return { ok: false, status: key.status, reason: key.reason };
  // Without an explicit client IP the caller's own address is the identity (a sidecar per client).
  const address = data.ip ?? clientAddress(c, identity);
  const request: RequestContext = {
    apiKey: key.apiKey,
    ip: ipKey(address, ipv6PrefixOf(identity)),
    address,
    method: data.method,
    path: data.path,
    cost: data.cost ?? 1,
  };
  if (data.consume === false) request.peek = true;
  return { ok: true, request };
}

export function reasons(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`);
}

/**
 * JSON whatever the Content-Type says (`curl -d` sends form encoding by default and means JSON), at most
 * CHECK_BODY_LIMIT_BYTES (413 above).
 */
export async function readJson(c: Context): Promise<{ ok: true; value: unknown } | { ok: false; response: Response }> {
  const body = await readBodyText(c, CHECK_BODY_LIMIT_BYTES);
  if (!body.ok) return body;
  try {
    return { ok: true, value: JSON.parse(body.text) };
  } catch {
    return { ok: false, response: jsonError(400, 'Invalid request body', { reasons: ['body is not valid JSON'] }) };
  }
}

/** The /v1/check answer: the rate-limit headers and the JSON body, built together. */
export interface CheckAnswer {
  /** Exactly rateLimitHeaders(decision, at) (src/http/headers.ts). */
  headers: Record<string, string>;
  /** The documented object as JSON (README, "POST /v1/check"). */
  json: string;
}

/**
 * The /v1/check answer: the headers of rateLimitHeaders and the documented object (allowed, status, limit,
 * remaining, regionRemaining, reset, retryAfter, rule, headers, leases, outcomes; then `degraded` when Redis
 * did not decide, and `error` when the cost exceeds a rule's limit). `remaining` is the headers' count (the
 * federation's remaining quota as this region sees it), `regionRemaining` what this region can still admit on
 * its own; both and `reset` are null when nothing was counted (fail-open); `status` is 422 with no retryAfter
 * for a request that can never be admitted, and the binding rule's `denial.status` (else 429) over a limit. When an allow or deny list decided, `list` says which
 * ({list, kind, source}); a denied caller's `status` is 403 with the reason in `error`.
 */
export function checkAnswer(
  decision: Pick<Decision, 'allowed' | 'binding' | 'leases' | 'outcomes' | 'list'>,
  at: number,
  options: { cost?: number; rules?: RuleLookup | undefined; peek?: boolean | undefined; settle?: string | undefined } = {},
): CheckAnswer {
  const binding = decision.binding;
  const impossible = costExceedsLimit(decision, options.cost ?? 1);
  const headers = rateLimitHeaders(decision, at, { rules: options.rules });
  if (impossible) delete headers['Retry-After'];
  const remaining = binding ? remainingOf(binding) : undefined;
  const body: Record<string, unknown> = {
    allowed: decision.allowed,
    // What the caller should answer its client: the binding rule's own denial status when it sets one.
    status: decision.allowed
      ? 200
      : impossible
        ? COST_EXCEEDS_LIMIT_STATUS
        : ((binding && options.rules?.(binding.rule)?.denial?.status) ?? 429),
    limit: binding?.limit ?? null,
    remaining: remaining ?? null,
    regionRemaining: (binding ? regionRemainingOf(binding) : undefined) ?? null,
    reset: headers['X-RateLimit-Reset'] === undefined ? null : Number(headers['X-RateLimit-Reset']),
    retryAfter: headers['Retry-After'] === undefined ? null : Number(headers['Retry-After']),
    rule: binding?.rule ?? null,
    headers,
    leases: decision.leases,
    outcomes: decision.outcomes.map((o) => ({
      rule: o.rule,
      algorithm: o.algorithm,
      allowed: o.allowed,
      limit: o.limit,
      remaining: remainingOf(o) ?? null,
      regionRemaining: regionRemainingOf(o) ?? null,
      resetAtMs: o.resetAtMs,
      retryAfterMs: o.retryAfterMs,
      periodMs: o.periodMs,
      shadow: o.shadow,
      source: o.source,
    })),
  };
  const degraded = degradedSource(decision);
  if (degraded !== undefined) body.degraded = degraded;
  // `"consume": false`: the answer of the decision, nothing spent.
  if (options.peek === true) body.consumed = false;
  // Settled once the answer is known (countResponses, costFromResponse): the token POST /v1/release takes back.
  if (options.settle !== undefined) body.settle = options.settle;
  if (impossible) body.error = costExceedsLimitReason(impossible, options.cost ?? 1);
  // Decided by a list before any rule: which one, and for the deny list the 403 the caller should answer.
  if (decision.list) {
    body.list = decision.list;
    if (decision.list.list === 'deny') {
      body.status = LIST_DENIED_STATUS;
      body.error = listDeniedReason(decision.list);
    }
  }
  return { headers, json: JSON.stringify(body) };
}

/**
 * Writes a 200 JSON answer straight to Node's response when there is one (one writeHead and one end, no web
 * Response for @hono/node-server to take apart), else returns it as a Response (app.request in tests).
 * Adds Content-Type (and Content-Length) to `headers`.
 *
 * @example
 * const { headers, json } = checkAnswer(decision, Date.now());
 * return writeAnswer(c, headers, json);
 */
export function writeAnswer(c: Context, headers: Record<string, string>, json: string): Response {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  if (outgoing === undefined || outgoing.headersSent) {
    headers['Content-Type'] = 'application/json';
    return new Response(json, { status: 200, headers });
  }
  headers['Content-Type'] = 'application/json';
  headers['Content-Length'] = `${Buffer.byteLength(json)}`;
  outgoing.writeHead(200, headers);
  outgoing.end(json);
  return RESPONSE_ALREADY_SENT;
}

export interface CheckRouteOptions {
  engine: DecisionEngine;
  identity: IdentitySettings;
  paths?: PathSettings;
  /** The rules in force, by name (a token bucket's policy header states its refill). */
  rules?: RuleLookup;
  now?: () => number;
  /**
   * Settle tokens for admissions settled once the answer is known (/v1/check hands one out, /v1/release takes it
   * back), and the rules in force by name; without it /v1/check hands out none.
   */
  settle?: { tokens: SettleTokens; ruleOf: (name: string) => Rule | undefined };
  /** The deployment's key layout (`redis.keyPrefix`): /v1/release takes only lease keys under it (default `qf`). */
  keys?: KeyLayout;
}

export function registerCheckRoutes(app: Hono<QuotafedEnv>, options: CheckRouteOptions): void {
  const schema = checkBodySchema(options.identity, options.paths);
  const now = options.now ?? Date.now;
  const keys = options.keys ?? keyLayout();

  app.post('/v1/check', async (c) => {
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const parsed = schema.safeParse(body.value);
    if (!parsed.success) return jsonError(400, 'Invalid request body', { reasons: reasons(parsed.error) });
    const built = checkRequest(c, parsed.data, options.identity);
    if (!built.ok) return c.json({ allowed: false, status: built.status, error: built.reason }, 200);
    const request = built.request;
    const decision = await options.engine.decide(request);
    await answerTurn(decision);
    const settle =
      decision.refund && options.settle && options.engine.settleResponse ? options.settle.tokens.issue(decision.refund) : undefined;
    const { headers, json } = checkAnswer(decision, now(), { cost: request.cost, rules: options.rules, peek: request.peek, settle });
    return writeAnswer(c, headers, json);
  });

  app.post('/v1/release', async (c) => {
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const parsed = ReleaseBody.safeParse(body.value);
    if (!parsed.success) return jsonError(400, 'Invalid request body', { reasons: reasons(parsed.error) });
    const { leases, settle } = parsed.data;
    // A key under another prefix is another deployment's on a shared Redis: never released from here.
    const foreign = leases.findIndex((lease) => !keys.statePattern.test(lease.key));
    if (foreign !== -1)
      return jsonError(400, 'Invalid request body', {
        reasons: [`leases.${foreign}.key: not a lease key of this deployment (redis.keyPrefix "${keys.prefix}")`],
      });
    let refunded: number | undefined;
    if (settle !== undefined) {
      if (options.settle === undefined || options.engine.settleResponse === undefined)
        return jsonError(400, 'Invalid request body', { reasons: ['settle: this service settles no admissions'] });
      const opened = options.settle.tokens.open(settle.token, options.settle.ruleOf);
      if (!opened.ok) return jsonError(400, 'Invalid request body', { reasons: [`settle.token: ${opened.reason}`] });
      const admitted: Decision = { allowed: true, outcomes: [], binding: undefined, leases: [], refund: opened.ticket };
      refunded = await options.engine.settleResponse(admitted, settle.status, () => settle.cost);
    }
    await options.engine.release(leases satisfies Lease[]);
    return c.json(refunded === undefined ? { released: leases.length } : { released: leases.length, refunded });
  });
}

// POST /v1/check: the gateway's decision as JSON, for sidecars and internal callers that bypass the gateway.
// The response carries the same rate-limit headers; `status` says what the caller should answer its client.
// POST /v1/release returns concurrency leases taken by a check.
import type { Context, Hono } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { z } from 'zod';
import type { Decision, DecisionEngine, Lease, RequestContext } from '../engine/types.ts';
import { STATE_KEY_PATTERN } from '../keys.ts';
import type { QuotafedEnv } from './env.ts';
import { retryAfterSeconds } from './headers.ts';
import { checkApiKey, clientIp, type IdentitySettings } from './identity.ts';
import { jsonError } from './json-error.ts';
import { DEFAULT_PATH_SETTINGS, canonicalPath, pathBytes, type PathSettings } from './path.ts';
import { readBodyText } from './read-body.ts';

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
    .max(100),
});

export type CheckBody = z.output<ReturnType<typeof checkBodySchema>>;

const METHOD = /^[A-Za-z]{1,16}$/;
const CHECK_FIELDS: ReadonlySet<string> = new Set(['apiKey', 'ip', 'method', 'path', 'cost']);

/**
 * The schema's accepting path written out by hand (about 10x cheaper than zod on the hot path). Returns
 * undefined for anything it does not accept; the caller then runs the schema for the reasons, so the error
 * contract is zod's, unchanged.
 */
export function acceptCheckBody(
  value: unknown,
  identity: IdentitySettings,
  paths: PathSettings = DEFAULT_PATH_SETTINGS,
): CheckBody | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const body = value as Record<string, unknown>;
  for (const field in body) if (!CHECK_FIELDS.has(field)) return undefined;
  const { apiKey, ip, method, path, cost } = body;
  if (apiKey !== undefined) {
    if (typeof apiKey !== 'string') return undefined;
    // UTF-8 needs at most 3 bytes per UTF-16 unit: count the bytes only when the key could be too long.
    if (apiKey.length * 3 > identity.maxApiKeyBytes && Buffer.byteLength(apiKey, 'utf8') > identity.maxApiKeyBytes) return undefined;
  }
  if (ip !== undefined && (typeof ip !== 'string' || isIP(ip) === 0)) return undefined;
  if (typeof method !== 'string' || !METHOD.test(method)) return undefined;
  if (typeof path !== 'string' || path.charCodeAt(0) !== 47 || path.length > 4096) return undefined;
  if (cost !== undefined && (typeof cost !== 'number' || !Number.isInteger(cost) || cost <= 0 || cost > 1_000_000)) return undefined;
  // The canonical form the gateway matches and forwards (src/http/path.ts): no spelling skips a rule. A path
  // without one falls through to the schema, which gives the reason.
  const canonical = canonicalPath(pathBytes(path), paths);
  if (!canonical.ok) return undefined;
  return {
    apiKey: apiKey as string | undefined,
    ip: ip as string | undefined,
    method: method.toUpperCase(),
    path: canonical.path,
    cost: cost as number | undefined,
  };
}

function reasons(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`);
}

/**
 * JSON whatever the Content-Type says (`curl -d` sends form encoding by default and means JSON), at most
 * CHECK_BODY_LIMIT_BYTES (413 above).
 */
async function readJson(c: Context): Promise<{ ok: true; value: unknown } | { ok: false; response: Response }> {
  const body = await readBodyText(c, CHECK_BODY_LIMIT_BYTES);
  if (!body.ok) return body;
  try {
    return { ok: true, value: JSON.parse(body.text) };
  } catch {
    return { ok: false, response: jsonError(400, 'Invalid request body', { reasons: ['body is not valid JSON'] }) };
  }
}

/** JSON text of a string, memoised for the strings that repeat (rule names, algorithms, sources, limits). */
const quoted = new Map<string, string>();
function q(value: string): string {
  let text = quoted.get(value);
  if (text === undefined) {
    text = JSON.stringify(value);
    if (quoted.size < 4096) quoted.set(value, text);
  }
  return text;
}

/** A JSON number as JSON.stringify writes it (null for NaN and infinities). */
const num = (value: number): string => (Number.isFinite(value) ? `${value}` : 'null');

/** The /v1/check answer: the rate-limit headers and the JSON body, built together. */
export interface CheckAnswer {
  /** Exactly rateLimitHeaders(decision, at) (src/http/headers.ts). */
  headers: Record<string, string>;
  /** Exactly JSON.stringify of the documented object (test/http/check-body.test.ts compares the two). */
  json: string;
}

/**
 * The /v1/check answer, written from a template: the headers of rateLimitHeaders and the same text as
 * JSON.stringify of the documented object (allowed, status, limit, remaining, reset, retryAfter, rule, headers,
 * leases, outcomes; in that order), built together from the binding outcome without building either object
 * first. The JSON text of a rule name (and of the other strings that repeat) is memoised. About half the CPU
 * of building the headers and stringifying the object.
 */
export function checkAnswer(decision: Pick<Decision, 'allowed' | 'binding' | 'leases' | 'outcomes'>, at: number): CheckAnswer {
  const binding = decision.binding;
  const status = decision.allowed ? 200 : 429;
  let headers: Record<string, string>;
  let json: string;
  if (!binding) {
    headers = {};
    json = `{"allowed":${decision.allowed},"status":${status},"limit":null,"remaining":null,"reset":null,"retryAfter":null,"rule":null,"headers":{}`;
  } else {
    // rateLimitHeaders' figures, computed the same way.
    const remaining = Math.max(0, Math.floor(binding.remaining));
    const reset = Math.max(0, Math.ceil((binding.resetAtMs - at) / 1000));
    const window = Math.max(1, Math.ceil(binding.periodMs / 1000));
    const limit = `${binding.limit}`;
    const rule = q(binding.rule);
    // A header value's JSON escapes are the escapes of its parts: the rule's, without its quotes.
    const ruleText = rule.slice(1, -1);
    const limitText = q(limit).slice(1, -1);
    headers = {
      'X-RateLimit-Limit': limit,
      'X-RateLimit-Remaining': `${remaining}`,
      'X-RateLimit-Reset': `${reset}`,
      'RateLimit-Policy': `"${binding.rule}";q=${limit};w=${window}`,
      RateLimit: `"${binding.rule}";r=${remaining};t=${reset}`,
    };
    let retryAfter = 'null';
    let retryHeader = '';
    if (!decision.allowed) {
      const seconds = retryAfterSeconds(binding, at);
      headers['Retry-After'] = `${seconds}`;
      retryAfter = num(seconds);
      retryHeader = `,"Retry-After":"${seconds}"`;
    }
    json =
      `{"allowed":${decision.allowed},"status":${status},"limit":${num(binding.limit)},"remaining":${num(remaining)}` +
      `,"reset":${num(reset)},"retryAfter":${retryAfter},"rule":${rule}` +
      `,"headers":{"X-RateLimit-Limit":"${limitText}","X-RateLimit-Remaining":"${remaining}","X-RateLimit-Reset":"${reset}"` +
      `,"RateLimit-Policy":"\\"${ruleText}\\";q=${limitText};w=${window}","RateLimit":"\\"${ruleText}\\";r=${remaining};t=${reset}"` +
      `${retryHeader}}`;
  }
  json += `,"leases":${decision.leases.length === 0 ? '[]' : JSON.stringify(decision.leases)},"outcomes":[`;
  const outcomes = decision.outcomes;
  for (let i = 0; i < outcomes.length; i++) {
    const o = outcomes[i]!;
    json +=
      `${i === 0 ? '' : ','}{"rule":${q(o.rule)},"algorithm":${q(o.algorithm)},"allowed":${o.allowed},"limit":${num(o.limit)}` +
      `,"remaining":${num(Math.max(0, Math.floor(o.remaining)))},"resetAtMs":${num(o.resetAtMs)},"retryAfterMs":${num(o.retryAfterMs)}` +
      `,"periodMs":${num(o.periodMs)},"shadow":${o.shadow},"source":${q(o.source)}}`;
  }
  return { headers, json: `${json}]}` };
}

/**
 * Writes a 200 JSON answer straight to Node's response when there is one (one writeHead and one end, no web
 * Response for @hono/node-server to take apart), else returns it as a Response (app.request in tests).
 */
function answer(c: Context, headers: Record<string, string>, json: string): Response {
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
  now?: () => number;
}

export function registerCheckRoutes(app: Hono<QuotafedEnv>, options: CheckRouteOptions): void {
  const schema = checkBodySchema(options.identity, options.paths);
  const now = options.now ?? Date.now;

  app.post('/v1/check', async (c) => {
    const body = await readJson(c);
    if (!body.ok) return body.response;
    let data = acceptCheckBody(body.value, options.identity, options.paths);
    if (data === undefined) {
      const parsed = schema.safeParse(body.value);
      if (!parsed.success) return jsonError(400, 'Invalid request body', { reasons: reasons(parsed.error) });
      data = parsed.data;
    }

    const key = checkApiKey(data.apiKey, options.identity);
    if (!key.ok) return c.json({ allowed: false, status: key.status, error: key.reason }, 200);

    const request: RequestContext = {
      apiKey: key.apiKey,
      // Without an explicit client IP the caller's own address is the identity (a sidecar per client).
      ip: data.ip ?? clientIp(c, options.identity),
      method: data.method,
      path: data.path,
      cost: data.cost ?? 1,
    };
    const decision = await options.engine.decide(request);
    const { headers, json } = checkAnswer(decision, now());
    return answer(c, headers, json);
  });

  app.post('/v1/release', async (c) => {
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const parsed = ReleaseBody.safeParse(body.value);
    if (!parsed.success) return jsonError(400, 'Invalid request body', { reasons: reasons(parsed.error) });
    await options.engine.release(parsed.data.leases satisfies Lease[]);
    return c.json({ released: parsed.data.leases.length });
  });
}

// POST /v1/check: the gateway's decision as JSON, for sidecars and internal callers that bypass the gateway.
// The response carries the same rate-limit headers; `status` says what the caller should answer its client.
// POST /v1/release returns concurrency leases taken by a check.
import type { Context, Hono } from 'hono';
import { isIP } from 'node:net';
import { z } from 'zod';
import type { DecisionEngine, Lease, RequestContext } from '../engine/types.ts';
import { STATE_KEY_PATTERN } from '../keys.ts';
import type { QuotafedEnv } from './env.ts';
import { applyHeaders, rateLimitHeaders, retryAfterSeconds } from './headers.ts';
import { checkApiKey, clientIp, type IdentitySettings } from './identity.ts';
import { jsonError } from './json-error.ts';
import { DEFAULT_PATH_SETTINGS, canonicalPath, pathBytes, type PathSettings } from './path.ts';

export const CHECK_BODY_LIMIT_BYTES = 16 * 1024;

export function checkBodySchema(identity: IdentitySettings, paths: PathSettings = DEFAULT_PATH_SETTINGS) {
  return z.strictObject({
    apiKey: z
      .string()
      .refine((key) => Buffer.byteLength(key, 'utf8') <= identity.maxApiKeyBytes, { error: `API key longer than ${identity.maxApiKeyBytes} bytes` })
      .optional(),
    ip: z.string().refine((ip) => isIP(ip) !== 0, { error: 'expected an IPv4 or IPv6 address' }).optional(),
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

function reasons(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`);
}

/** JSON whatever the Content-Type says: `curl -d` sends form encoding by default and means JSON. */
async function readJson(c: Context): Promise<{ ok: true; value: unknown } | { ok: false; response: Response }> {
  try {
    return { ok: true, value: JSON.parse(await c.req.text()) };
  } catch {
    return { ok: false, response: jsonError(400, 'Invalid request body', { reasons: ['body is not valid JSON'] }) };
  }
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
    const parsed = schema.safeParse(body.value);
    if (!parsed.success) return jsonError(400, 'Invalid request body', { reasons: reasons(parsed.error) });

    const key = checkApiKey(parsed.data.apiKey, options.identity);
    if (!key.ok) return c.json({ allowed: false, status: key.status, error: key.reason }, 200);

    const request: RequestContext = {
      apiKey: key.apiKey,
      // Without an explicit client IP the caller's own address is the identity (a sidecar per client).
      ip: parsed.data.ip ?? clientIp(c, options.identity),
      method: parsed.data.method,
      path: parsed.data.path,
      cost: parsed.data.cost ?? 1,
    };
    const decision = await options.engine.decide(request);
    const at = now();
    const headers = rateLimitHeaders(decision, at);
    applyHeaders(c.res.headers, headers);
    const binding = decision.binding;
    return c.json({
      allowed: decision.allowed,
      status: decision.allowed ? 200 : 429,
      limit: binding?.limit ?? null,
      remaining: binding ? Math.max(0, Math.floor(binding.remaining)) : null,
      reset: headers['X-RateLimit-Reset'] === undefined ? null : Number(headers['X-RateLimit-Reset']),
      retryAfter: !decision.allowed && binding ? retryAfterSeconds(binding, at) : null,
      rule: binding?.rule ?? null,
      headers,
      leases: decision.leases,
      outcomes: decision.outcomes.map((o) => ({
        rule: o.rule,
        algorithm: o.algorithm,
        allowed: o.allowed,
        limit: o.limit,
        remaining: Math.max(0, Math.floor(o.remaining)),
        resetAtMs: o.resetAtMs,
        retryAfterMs: o.retryAfterMs,
        periodMs: o.periodMs,
        shadow: o.shadow,
        source: o.source,
      })),
    });
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

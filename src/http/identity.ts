// Who is calling: the API key (Authorization: Bearer … or X-API-Key) and the client IP (the socket's peer,
// or the right-most X-Forwarded-For entry when the operator says a trusted proxy sets it).
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import { isIP } from 'node:net';
import type { Config } from '../config/schema.ts';
import type { RequestContext } from '../engine/types.ts';

export type IdentitySettings = Config['identity'];

export const DEFAULT_IDENTITY: IdentitySettings = { anonymous: 'ip', trustForwardedFor: false, maxApiKeyBytes: 512 };

/** Either a usable identity or the client error to answer with. */
export type ApiKeyResult = { ok: true; apiKey: string | undefined } | { ok: false; status: 400 | 401; reason: string };

const BEARER = /^Bearer[ \t]+(\S.*)$/i;

/** Validates a key's size: the key is hashed before it touches Redis, but an 8 MB key still costs CPU. */
export function checkApiKey(apiKey: string | undefined, settings: IdentitySettings): ApiKeyResult {
  if (apiKey === undefined || apiKey === '') {
    return settings.anonymous === 'reject'
      ? { ok: false, status: 401, reason: 'an API key is required (Authorization: Bearer <key> or X-API-Key)' }
      : { ok: true, apiKey: undefined };
  }
  if (Buffer.byteLength(apiKey, 'utf8') > settings.maxApiKeyBytes) {
    return { ok: false, status: 400, reason: `API key longer than ${settings.maxApiKeyBytes} bytes` };
  }
  return { ok: true, apiKey };
}

/** The API key from the headers: a Bearer token wins over X-API-Key; other Authorization schemes are ignored. */
export function apiKeyFromHeaders(
  authorization: string | undefined,
  xApiKey: string | undefined,
  settings: IdentitySettings,
): ApiKeyResult {
  const bearer = authorization === undefined ? undefined : BEARER.exec(authorization.trim())?.[1]?.trim();
  return checkApiKey(bearer || xApiKey?.trim() || undefined, settings);
}

function normalizeIp(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

export function clientIp(c: Context, settings: IdentitySettings): string {
  if (settings.trustForwardedFor) {
    // The right-most entry is the one our trusted proxy appended; entries left of it are client-supplied.
    const forwarded = c.req
      .header('x-forwarded-for')
      ?.split(',')
      .map((part) => part.trim())
      .filter(Boolean)
      .at(-1);
    if (forwarded && isIP(forwarded)) return normalizeIp(forwarded);
  }
  try {
    const address = getConnInfo(c).remote.address;
    if (address) return normalizeIp(address);
  } catch {
    // No Node socket (app.request in a test, another runtime): fall through.
  }
  return 'unknown';
}

export type IdentifyResult = { ok: true; request: RequestContext } | { ok: false; status: 400 | 401; reason: string };

/** The default identity of a request reaching the gateway or the middleware. */
export function identifyRequest(c: Context, settings: IdentitySettings): IdentifyResult {
  const key = apiKeyFromHeaders(c.req.header('authorization'), c.req.header('x-api-key'), settings);
  if (!key.ok) return key;
  return { ok: true, request: { apiKey: key.apiKey, ip: clientIp(c, settings), method: c.req.method.toUpperCase(), path: c.req.path } };
}

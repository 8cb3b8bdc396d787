// Who is calling: the API key (Authorization: Bearer … or X-API-Key) and the client IP. The client IP is the
// socket's peer unless the operator trusts proxies in front (identity.clientIp: a list of proxy addresses, or a
// hop count; `trustForwardedFor` is one hop): then proxy-addr walks X-Forwarded-For (or RFC 7239 Forwarded)
// from the right, past every trusted proxy, to the first address that is not one. An IPv6 client is keyed by
// its prefix (/64 by default), so one host cannot get a fresh quota per address of its subnet.
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import { isIP } from 'node:net';
import proxyaddr from 'proxy-addr';
import { ipv6Groups } from '../config/cidr.ts';
import type { Config } from '../config/schema.ts';
import type { RequestContext } from '../engine/types.ts';

export type IdentitySettings = Config['identity'];

export type ClientIpSettings = IdentitySettings['clientIp'];

export const DEFAULT_CLIENT_IP: ClientIpSettings = { trustedProxies: [], header: 'x-forwarded-for', ipv6Prefix: 64 };

export const DEFAULT_IDENTITY: IdentitySettings = {
  anonymous: 'ip',
  trustForwardedFor: false,
  maxApiKeyBytes: 512,
  clientIp: DEFAULT_CLIENT_IP,
};

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

type Trust = (address: string, hop: number) => boolean;

/** How far the forwarding header is believed, or undefined when it is not (the socket's peer is the client). */
function trustOf(settings: IdentitySettings): Trust | undefined {
  const cached = trustCache.get(settings);
  if (cached !== undefined || trustCache.has(settings)) return cached;
  const { trustedProxies, hops } = settings.clientIp ?? DEFAULT_CLIENT_IP;
  let trust: Trust | undefined;
  if (trustedProxies.length > 0) trust = proxyaddr.compile(trustedProxies);
  else {
    const count = hops ?? (settings.trustForwardedFor ? 1 : 0);
    if (count > 0) trust = (_address, hop) => hop < count;
  }
  trustCache.set(settings, trust);
  return trust;
}
const trustCache = new WeakMap<IdentitySettings, Trust | undefined>();

/** Whether the request's forwarding header is read at all (the gateway then passes the chain on). */
export function trustsForwarded(settings: IdentitySettings): boolean {
  return trustOf(settings) !== undefined;
}

/**
 * The `for=` nodes of an RFC 7239 Forwarded header, in order, as addresses: quotes, `[…]` and ports removed;
 * obfuscated or `unknown` nodes kept as they are (they are never an IP, so never trusted or used).
 */
export function forwardedFor(header: string): string[] {
  const nodes: string[] = [];
  for (const element of header.split(',')) {
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=');
      if (eq === -1 || pair.slice(0, eq).trim().toLowerCase() !== 'for') continue;
      let node = pair.slice(eq + 1).trim();
      if (node.startsWith('"') && node.endsWith('"') && node.length >= 2) node = node.slice(1, -1);
      if (node.startsWith('[')) node = node.slice(1, node.indexOf(']') === -1 ? undefined : node.indexOf(']'));
      else if (node.indexOf(':') !== -1 && node.indexOf(':') === node.lastIndexOf(':')) node = node.slice(0, node.indexOf(':'));
      nodes.push(node);
    }
  }
  return nodes;
}

function socketAddress(c: Context): string | undefined {
  try {
    return getConnInfo(c).remote.address || undefined;
  } catch {
    // No Node socket (app.request in a test, another runtime).
    return undefined;
  }
}

/** The client's address as the proxies in front report it (not prefix-keyed): what the gateway forwards. */
export function clientAddress(c: Context, settings: IdentitySettings): string {
  const socket = socketAddress(c);
  const trust = trustOf(settings);
  if (trust !== undefined) {
    const clientIpSettings = settings.clientIp ?? DEFAULT_CLIENT_IP;
    const chain =
      clientIpSettings.header === 'forwarded'
        ? forwardedFor(c.req.header('forwarded') ?? '').join(', ')
        : (c.req.header('x-forwarded-for') ?? '');
    if (chain !== '') {
      const address = proxyaddr({ headers: { 'x-forwarded-for': chain }, socket: { remoteAddress: socket ?? '' } } as never, trust);
      if (isIP(address)) return normalizeIp(address);
    }
  }
  return socket === undefined ? 'unknown' : normalizeIp(socket);
}

/** An IPv6 address keyed by its first `prefix` bits (`2001:db8:1:2::/64`); IPv4 and non-addresses unchanged. */
export function ipKey(address: string, prefix: number): string {
  if (prefix >= 128 || isIP(address) !== 6) return address;
  const groups = ipv6Groups(address.split('%')[0]!);
  const masked = groups.map((group, i) => {
    const bits = Math.min(16, Math.max(0, prefix - i * 16));
    return bits === 16 ? group : bits === 0 ? 0 : group & (0xffff << (16 - bits)) & 0xffff;
  });
  // Compressed form: trailing zero groups (and only those, so the key is stable) become "::".
  let end = masked.length;
  while (end > 0 && masked[end - 1] === 0) end -= 1;
  const head = masked.slice(0, end).map((group) => group.toString(16));
  return `${head.join(':')}${end < 8 ? '::' : ''}/${prefix}`;
}

/** The client IP as rules key it: `clientAddress`, an IPv6 one cut to `identity.clientIp.ipv6Prefix`. */
export function clientIp(c: Context, settings: IdentitySettings): string {
  return ipKey(clientAddress(c, settings), ipv6PrefixOf(settings));
}

/** The prefix IPv6 callers are keyed by (identity.clientIp.ipv6Prefix, /64 by default). */
export function ipv6PrefixOf(settings: IdentitySettings): number {
  return (settings.clientIp ?? DEFAULT_CLIENT_IP).ipv6Prefix;
}

export type IdentifyResult = { ok: true; request: RequestContext } | { ok: false; status: 400 | 401; reason: string };

/** The default identity of a request reaching the gateway or the middleware. */
export function identifyRequest(c: Context, settings: IdentitySettings): IdentifyResult {
  const key = apiKeyFromHeaders(c.req.header('authorization'), c.req.header('x-api-key'), settings);
  if (!key.ok) return key;
  const address = clientAddress(c, settings);
  return {
    ok: true,
    request: {
      apiKey: key.apiKey,
      ip: ipKey(address, ipv6PrefixOf(settings)),
      address,
      method: c.req.method.toUpperCase(),
      path: c.req.path,
    },
  };
}

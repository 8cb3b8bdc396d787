// The one canonical form of a request path. Rules are matched on it (gateway, /v1/check and the embedded
// middleware alike) and the gateway forwards exactly it, so no spelling of a path can skip a rule and still
// reach the upstream as the resource the rule protects:
//   - percent-escapes of unreserved characters (A-Z a-z 0-9 - . _ ~) are decoded, other escapes kept with
//     upper-case hex; an invalid escape, an encoded slash or backslash (%2F, %5C) and encoded control
//     characters (%00-%1F, %7F, so NUL) are refused;
//   - `;params` are dropped from every segment (`/checkout;x` is /checkout, `/a/..;/b` is /b);
//   - repeated slashes collapse (`//x/checkout` is /x/checkout: the path, never a host);
//   - `.` and `..` segments are resolved; a `..` that would leave the root is refused;
//   - a segment that begins or ends with whitespace (`/checkout%20`) is refused: upstreams disagree on trimming;
//   - case: folded to lower case unless `paths.caseSensitive`; trailing slash: dropped unless
//     `paths.trailingSlash` is "strict".
import type { Context } from 'hono';
import type { Config } from '../config/schema.ts';
import type { QuotafedEnv } from './env.ts';
import { jsonError } from './json-error.ts';

export type PathSettings = Config['paths'];

export const DEFAULT_PATH_SETTINGS: PathSettings = { caseSensitive: false, trailingSlash: 'ignore' };

export type CanonicalPath = { ok: true; path: string } | { ok: false; reason: string };

const HEX = /^[0-9A-Fa-f]{2}$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** RFC 3986 pchar without "%" (escapes are handled apart) and without ";" (params are cut off before). */
const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,=:@]$/;
const EDGE_SPACE = /^(%20)|(%20)$/;

const refuse = (reason: string): CanonicalPath => ({ ok: false, reason });

/** Already canonical (the common case): pchar segments, no dot segments, no escapes, no trailing slash. */
const CANONICAL_LOWER = /^(?:\/(?!\.\.?(?:\/|$))[a-z0-9\-._~!$&'()*+,=:@]+)+$/;
const CANONICAL_ANY_CASE = /^(?:\/(?!\.\.?(?:\/|$))[A-Za-z0-9\-._~!$&'()*+,=:@]+)+$/;

/** One segment with its escapes resolved; a string starting with "!" is the reason it was refused. */
function segmentOf(raw: string, caseSensitive: boolean): string {
  const params = raw.indexOf(';');
  const text = params === -1 ? raw : raw.slice(0, params);
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    const code = char.charCodeAt(0);
    if (code < 0x20 || code === 0x7f) return '!control character in the path';
    if (char === '\\') return '!backslash in the path';
    if (char !== '%') {
      if (PCHAR.test(char)) out += caseSensitive ? char : char.toLowerCase();
      // Anything else (a quote, a brace, a byte of UTF-8) travels percent-encoded, so the form is plain ASCII.
      else if (code <= 0xff) out += `%${code.toString(16).toUpperCase().padStart(2, '0')}`;
      else return '!path characters must be bytes (UTF-8 percent-encoded)';
      continue;
    }
    const hex = text.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return '!invalid percent-escape in the path';
    i += 2;
    const byte = Number.parseInt(hex, 16);
    const decoded = String.fromCharCode(byte);
    if (byte === 0x2f || byte === 0x5c) return '!encoded slash or backslash in the path';
    if (byte < 0x20 || byte === 0x7f) return '!encoded control character (such as NUL) in the path';
    if (UNRESERVED.test(decoded)) out += caseSensitive ? decoded : decoded.toLowerCase();
    else out += `%${hex.toUpperCase()}`;
  }
  if (EDGE_SPACE.test(out)) return '!whitespace at the edge of a path segment';
  return out;
}

/**
 * The canonical form of `raw` (a request path as bytes, one character per byte, as Node hands over a request
 * target; anything from "?" or "#" on is ignored). A path that is a Unicode string goes through `pathBytes` first.
 */
export function canonicalPath(raw: string, settings: PathSettings = DEFAULT_PATH_SETTINGS): CanonicalPath {
  const end = raw.search(/[?#]/);
  const path = end === -1 ? raw : raw.slice(0, end);
  if (path === '/' || (settings.caseSensitive ? CANONICAL_ANY_CASE : CANONICAL_LOWER).test(path)) return { ok: true, path };
  if (!path.startsWith('/')) return refuse('the path must start with "/"');
  const parts = path.split('/');
  const segments: string[] = [];
  for (let i = 1; i < parts.length; i++) {
    const segment = segmentOf(parts[i]!, settings.caseSensitive);
    if (segment.startsWith('!')) return refuse(segment.slice(1));
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.length === 0) return refuse('".." leaves the root of the path');
      segments.pop();
      continue;
    }
    segments.push(segment);
  }
  const last = parts.at(-1)!;
  const trailing = settings.trailingSlash === 'strict' && segments.length > 0 && (last === '' || last === '.' || last === '..');
  return { ok: true, path: `/${segments.join('/')}${trailing ? '/' : ''}` };
}

/** A Unicode path (a /v1/check body) as the bytes a client would send: its UTF-8, one character per byte. */
export function pathBytes(path: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is for anything outside ASCII
  return /^[\x00-\x7f]*$/.test(path) ? path : Buffer.from(path, 'utf8').toString('latin1');
}

/** The request target exactly as the client sent it (Node), else the parsed URL's path (other runtimes, tests). */
export function rawRequestPath(url: string, incomingUrl: string | undefined): string {
  if (incomingUrl?.startsWith('/')) return incomingUrl;
  // An absolute-form target ("GET http://host/path"): its path.
  if (incomingUrl !== undefined && /^https?:\/\//i.test(incomingUrl)) {
    const afterScheme = incomingUrl.indexOf('//') + 2;
    const slash = incomingUrl.indexOf('/', afterScheme);
    return slash === -1 ? '/' : incomingUrl.slice(slash);
  }
  const afterScheme = url.indexOf('//') + 2;
  const slash = url.indexOf('/', afterScheme);
  return slash === -1 ? '/' : url.slice(slash);
}

/**
 * The canonical path of a Hono request: the one the gateway already computed, else from the raw request target
 * (Node hands us what the client sent; the parsed URL has resolved dot segments already).
 */
export function canonicalRequestPath(c: Context<QuotafedEnv>, settings: PathSettings): CanonicalPath {
  const known = c.get('canonicalPath');
  if (known !== undefined) return { ok: true, path: known };
  const incoming = (c.env as Partial<QuotafedEnv['Bindings']> | undefined)?.incoming?.url;
  return canonicalPath(rawRequestPath(c.req.url, incoming), settings);
}

/** 400 with the reason, for a path that has no canonical form. */
export function invalidPath(reason: string): Response {
  return jsonError(400, 'Invalid request path', { reasons: [reason] });
}

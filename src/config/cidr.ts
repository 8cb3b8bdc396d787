// IP addresses and CIDR ranges as the allow and deny lists write them (`203.0.113.7`, `10.0.0.0/8`,
// `2001:db8::/32`): parsed once, in one canonical spelling, so a config entry and an admin entry for the same
// range are the same entry. Matching (src/engine/access-lists.ts) looks up `networkKey`s, one set per prefix length.
import { isIP } from 'node:net';

/** One IP entry of a list: an address (prefix = the family's width) or a network and its prefix length. */
export interface IpRange {
  family: 4 | 6;
  /** The network address in canonical form (IPv6 compressed, lower case). */
  network: string;
  prefix: number;
  /** What an operator reads and deletes it by: `10.0.0.0/8`, or the bare address for a /32 (/128). */
  text: string;
}

/** The eight 16-bit groups of a valid IPv6 address (an embedded IPv4 tail included; no zone id). */
export function ipv6Groups(address: string): number[] {
  let text = address;
  const tail = text.includes('.') ? /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text) : null;
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = rest === undefined ? [] : rest ? rest.split(':') : [];
  const zeros = rest === undefined ? 0 : 8 - left.length - right.length;
  return [...left, ...Array<string>(zeros).fill('0'), ...right].map((group) => Number.parseInt(group, 16));
}

/** The address's bits, most significant first: 4 bytes for IPv4, 16 for IPv6. */
export function bytesOf(address: string, family: 4 | 6): number[] {
  if (family === 4) return address.split('.').map(Number);
  const bytes: number[] = [];
  for (const group of ipv6Groups(address)) bytes.push(group >> 8, group & 0xff);
  return bytes;
}

function textOf(bytes: readonly number[], family: 4 | 6): string {
  if (family === 4) return bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // The WHATWG URL serializer writes RFC 5952's compressed form.
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/**
 * Parses a list's IP entry: an IPv4 or IPv6 address, or a CIDR range whose host bits are zero. Returns the reason
 * when it is not one, for the config error or the admin API's 400.
 *
 * @example
 * ```ts
 * parseIpRange('2001:DB8::/32'); // { ok: true, range: { family: 6, network: '2001:db8::', prefix: 32, text: '2001:db8::/32' } }
 * parseIpRange('10.0.0.5/8');    // { ok: false, reason: 'host bits are set: did you mean 10.0.0.0/8?' }
 * ```
 */
export function parseIpRange(entry: string): { ok: true; range: IpRange } | { ok: false; reason: string } {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const family = isIP(address);
  if ((family !== 4 && family !== 6) || address.includes('%'))
    return { ok: false, reason: 'expected an IPv4 or IPv6 address or CIDR range (203.0.113.7, 10.0.0.0/8, 2001:db8::/32)' };
  const width = family === 4 ? 32 : 128;
  let prefix = width;
  if (slash !== -1) {
    const digits = entry.slice(slash + 1);
    prefix = /^\d{1,3}$/.test(digits) ? Number(digits) : Number.NaN;
    if (!(prefix >= 0 && prefix <= width)) return { ok: false, reason: `the prefix length must be 0-${width}` };
  }
  const bytes = bytesOf(address, family);
  const masked = bytes.map((byte, i) => {
    const bits = Math.min(8, Math.max(0, prefix - i * 8));
    return byte & ((0xff << (8 - bits)) & 0xff);
  });
  const network = textOf(masked, family);
  if (masked.some((byte, i) => byte !== bytes[i])) return { ok: false, reason: `host bits are set: did you mean ${network}/${prefix}?` };
  return { ok: true, range: { family, network, prefix, text: prefix === width ? network : `${network}/${prefix}` } };
}

/**
 * The first `prefix` bits of an address, as a key: two addresses share the key of a prefix exactly when that prefix
 * holds both, so a list's ranges of one length are one Set to look up.
 *
 * @example
 * ```ts
 * networkKey(bytesOf('10.1.2.3', 4), 8) === networkKey(bytesOf('10.200.0.1', 4), 8); // true
 * ```
 */
export function networkKey(bytes: readonly number[], prefix: number): string {
  const whole = prefix >> 3;
  let key = '';
  for (let i = 0; i < whole; i += 1) key += `${bytes[i]}.`;
  const rest = prefix & 7;
  if (rest > 0) key += `${bytes[whole]! & ((0xff << (8 - rest)) & 0xff)}`;
  return key;
}

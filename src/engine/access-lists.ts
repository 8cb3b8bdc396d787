// Allow and deny lists, compiled for the decision path. The resilient engine asks `listVerdict` before it matches
// a single rule, so every way in (gateway, middleware, /v1/check, /v1/auth, Envoy's gRPC service) meets the lists
// in one place. API keys match exactly; IPs match by containment on the client's full address (node's
// net.BlockList), not on the IPv6 prefix key the rules count by. Deny wins over allow.
import { BlockList, isIP } from 'node:net';
import { parseIpRange, rangeContains, type IpRange } from '../config/cidr.ts';
import type { ListEntry } from '../config/schema.ts';
import type { ListVerdict, RequestContext } from './types.ts';

/** One list's entries, ready to match. */
export interface CompiledList {
  readonly apiKeys: ReadonlySet<string>;
  readonly blocks: BlockList;
  readonly ranges: readonly IpRange[];
}

/** Both lists of one source (the config file, or the admin entries in Redis). */
export interface CompiledLists {
  readonly allow: CompiledList;
  readonly deny: CompiledList;
  /** No entry in either list: the decision path skips them at the cost of one test. */
  readonly empty: boolean;
}

/** The two lists' entries as the config (or the admin store) holds them. */
export interface ListEntries {
  allow: readonly ListEntry[];
  deny: readonly ListEntry[];
}

function compileList(entries: readonly ListEntry[]): CompiledList {
  const apiKeys = new Set<string>();
  const blocks = new BlockList();
  const ranges: IpRange[] = [];
  for (const entry of entries) {
    if (entry.apiKey !== undefined) apiKeys.add(entry.apiKey);
    if (entry.ip === undefined) continue;
    const parsed = parseIpRange(entry.ip);
    if (!parsed.ok) continue; // validated by the schema; an invalid entry matches nothing
    const { range } = parsed;
    blocks.addSubnet(range.network, range.prefix, range.family === 4 ? 'ipv4' : 'ipv6');
    ranges.push(range);
  }
  return { apiKeys, blocks, ranges };
}

/**
 * Compiles both lists (done once per config and per admin refresh, never per request).
 *
 * @example
 * ```ts
 * const lists = compileLists({ allow: [{ apiKey: 'internal-batch' }], deny: [{ ip: '2001:db8:bad::/48' }] });
 * listVerdict(lists, { ip: '2001:db8:bad::/64', address: '2001:db8:bad::7', method: 'GET', path: '/' }, 'config');
 * // { list: 'deny', kind: 'ip', source: 'config' }
 * ```
 */
export function compileLists(entries: ListEntries): CompiledLists {
  return {
    allow: compileList(entries.allow),
    deny: compileList(entries.deny),
    empty: entries.allow.length === 0 && entries.deny.length === 0,
  };
}

export const NO_LISTS: CompiledLists = compileLists({ allow: [], deny: [] });

/** The caller's address as the lists see it: the full address, or a prefix key (`2001:db8:1:2::/64`) as a range. */
type Caller = { address: string; family: 'ipv4' | 'ipv6' } | { range: IpRange } | undefined;

function callerOf(request: RequestContext): Caller {
  const raw = request.address ?? request.ip;
  const address = raw.includes('%') ? raw.slice(0, raw.indexOf('%')) : raw;
  const family = isIP(address);
  if (family === 4) return { address, family: 'ipv4' };
  if (family === 6) return { address, family: 'ipv6' };
  if (!address.includes('/')) return undefined;
  const parsed = parseIpRange(address);
  return parsed.ok ? { range: parsed.range } : undefined;
}

function matches(list: CompiledList, request: RequestContext, caller: Caller): ListVerdict['kind'] | undefined {
  if (request.apiKey !== undefined && list.apiKeys.has(request.apiKey)) return 'apiKey';
  if (caller === undefined || list.ranges.length === 0) return undefined;
  if ('address' in caller) return list.blocks.check(caller.address, caller.family) ? 'ip' : undefined;
  // Only a prefix key is known: a range matches when it holds the caller's whole prefix.
  return list.ranges.some((range) => rangeContains(range, caller.range)) ? 'ip' : undefined;
}

/**
 * The list verdict for a request, deny first, or undefined when neither list names the caller.
 *
 * @example
 * ```ts
 * const verdict = listVerdict(lists, { apiKey: 'internal-batch', ip: '192.0.2.1', method: 'GET', path: '/' }, 'config');
 * if (verdict?.list === 'allow') console.log('no rule is asked');
 * ```
 */
export function listVerdict(lists: CompiledLists, request: RequestContext, source: ListVerdict['source']): ListVerdict | undefined {
  if (lists.empty) return undefined;
  const caller = callerOf(request);
  const denied = matches(lists.deny, request, caller);
  if (denied) return { list: 'deny', kind: denied, source };
  const allowed = matches(lists.allow, request, caller);
  return allowed ? { list: 'allow', kind: allowed, source } : undefined;
}

/**
 * The verdict of config and admin lists together: a deny from either wins over an allow from either.
 *
 * @example
 * ```ts
 * const verdict = combinedVerdict(compileLists(config.lists), adminLists.compiled(), request);
 * ```
 */
export function combinedVerdict(config: CompiledLists, admin: CompiledLists, request: RequestContext): ListVerdict | undefined {
  if (config.empty && admin.empty) return undefined;
  const fromConfig = listVerdict(config, request, 'config');
  if (fromConfig?.list === 'deny') return fromConfig;
  const fromAdmin = listVerdict(admin, request, 'admin');
  if (fromAdmin?.list === 'deny') return fromAdmin;
  return fromConfig ?? fromAdmin;
}

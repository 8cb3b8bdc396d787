// The allow and deny entries added through the admin API, kept in the region's Redis (KeyLayout.listsKey, src/keys.ts) so
// every gateway process of the region agrees. Each process holds a compiled copy and re-reads it every
// `lists.refreshMs` (one HGET of the change counter; the whole hash only when it moved) and right after its own
// writes. While Redis does not answer, the last copy stays in force. Entries are per region: nothing gossips them.
import { parseIpRange } from '../config/cidr.ts';
import { MAX_LIST_ENTRIES, type ListEntry } from '../config/schema.ts';
import type { KeyLayout } from '../keys.ts';
import type { Logger } from '../log.ts';
import { HASH_VERSION_FIELD as VERSION_FIELD, startHashCopy } from './hash-copy.ts';
import type { RegionRedis } from '../store/client.ts';
import { NO_LISTS, compileLists, type CompiledLists } from './access-lists.ts';

export type ListName = 'allow' | 'deny';

/** An admin entry as stored: the entry and when it was added (epoch ms). */
export type AdminListEntry = ListEntry & { addedAt: number };

export interface AdminListEntries {
  allow: AdminListEntry[];
  deny: AdminListEntry[];
}

/**
 * The region's admin-added list entries: the compiled copy the engine matches, and the writes of the admin API.
 *
 * @example
 * ```ts
 * const lists = createAdminLists({ redis, keys: layoutOf(config), refreshMs: 1000, logger });
 * await lists.add('deny', { ip: '198.51.100.0/24', comment: 'scraper' });
 * lists.compiled(); // what the engine matches now
 * lists.close();
 * ```
 */
export interface AdminLists {
  /** The entries in force in this process (as of the last refresh). */
  compiled(): CompiledLists;
  /** The entries as last read, for GET /admin/lists. */
  entries(): AdminListEntries;
  /** Re-read from Redis now (throws when Redis does not answer; the old copy stays). */
  refresh(): Promise<void>;
  /** Adds an entry (false when it was there already); refreshes this process's copy. */
  add(list: ListName, entry: ListEntry): Promise<{ added: boolean }>;
  /** Removes the entries of `list` whose API key or IP is `value`; returns what was removed. */
  remove(list: ListName, value: string): Promise<ListEntry[]>;
  close(): void;
}

export interface AdminListsOptions {
  redis: RegionRedis;
  /** The deployment's key layout (`redis.keyPrefix`): the entries live in its listsKey. */
  keys: KeyLayout;
  refreshMs: number;
  logger: Logger;
}

/** The list is full: MAX_LIST_ENTRIES admin entries already. */
export class ListFullError extends Error {
  constructor(list: ListName) {
    super(`the ${list} list holds ${MAX_LIST_ENTRIES} admin entries already; remove some first`);
    this.name = 'ListFullError';
  }
}

function fieldOf(list: ListName, entry: ListEntry): string {
  return entry.apiKey !== undefined ? `${list}:apiKey:${entry.apiKey}` : `${list}:ip:${entry.ip}`;
}

/** The hash's fields back as entries; a field of another shape (written by hand) is skipped. */
function parseHash(hash: Record<string, string>): AdminListEntries {
  const entries: AdminListEntries = { allow: [], deny: [] };
  for (const [field, value] of Object.entries(hash)) {
    const match = /^(allow|deny):(apiKey|ip):([\s\S]+)$/.exec(field);
    if (!match) continue;
    let meta: { comment?: unknown; addedAt?: unknown } = {};
    try {
      meta = JSON.parse(value) as typeof meta;
    } catch {
      // a value written by hand: keep the entry without its details
    }
    const entry: AdminListEntry = match[2] === 'apiKey' ? { apiKey: match[3]!, addedAt: 0 } : { ip: match[3]!, addedAt: 0 };
    if (typeof meta.comment === 'string') entry.comment = meta.comment;
    if (typeof meta.addedAt === 'number') entry.addedAt = meta.addedAt;
    entries[match[1] as ListName].push(entry);
  }
  for (const list of [entries.allow, entries.deny]) list.sort((a, b) => a.addedAt - b.addedAt);
  return entries;
}

export function createAdminLists(options: AdminListsOptions): AdminLists {
  const { redis } = options;
  const { listsKey } = options.keys;
  const log = options.logger.child({ module: 'admin-lists' });
  let compiled = NO_LISTS;
  let entries: AdminListEntries = { allow: [], deny: [] };
  const copy = startHashCopy({
    redis,
    key: listsKey,
    onChange: (hash) => {
      entries = parseHash(hash);
      compiled = compileLists(entries);
    },
    refreshMs: options.refreshMs,
    log,
    event: 'lists',
    what: 'admin list entries',
  });
  const { refresh, reread } = copy;

  return {
    compiled: () => compiled,
    entries: () => entries,
    refresh,
    async add(list, entry) {
      await refresh();
      const field = fieldOf(list, entry);
      if (entries[list].length >= MAX_LIST_ENTRIES && (await redis.hexists(listsKey, field)) === 0) throw new ListFullError(list);
      const value = JSON.stringify({ ...(entry.comment !== undefined ? { comment: entry.comment } : {}), addedAt: Date.now() });
      const reply = await redis.multi().hset(listsKey, field, value).hincrby(listsKey, VERSION_FIELD, 1).exec();
      if (reply === null || reply.some(([error]) => error)) throw reply?.find(([error]) => error)?.[0] ?? new Error('lists write aborted');
      await reread();
      return { added: reply[0]![1] === 1 };
    },
    async remove(list, value) {
      await refresh();
      const parsed = parseIpRange(value);
      const ip = parsed.ok ? parsed.range.text : value;
      const found = entries[list].filter((entry) => entry.apiKey === value || entry.ip === ip);
      if (found.length === 0) return [];
      const tx = redis.multi();
      for (const entry of found) tx.hdel(listsKey, fieldOf(list, entry));
      await tx.hincrby(listsKey, VERSION_FIELD, 1).exec();
      await reread();
      return found.map(({ addedAt: _addedAt, ...entry }) => entry);
    },
    close() {
      copy.close();
    },
  };
}

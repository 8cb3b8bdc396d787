// The allow and deny lists' admin routes (mounted under /admin, behind the admin token):
//   GET    /admin/lists                   both lists: the config's entries and the admin entries of this region
//   PUT    /admin/lists/{allow|deny}      body: one entry, {"apiKey": "..."} or {"ip": "10.0.0.0/8"} (+ "comment")
//   DELETE /admin/lists/{allow|deny}/<entry>   the admin entries with that API key or IP (a CIDR's "/" may stay
//                                             as it is or be sent as %2F)
// Admin entries live in the region's Redis (src/engine/admin-lists.ts): every process of the region follows within
// lists.refreshMs; other regions do not (apply them in every region).
import type { Context, Hono } from 'hono';
import { parseIpRange } from '../config/cidr.ts';
import { ListEntry, type Config } from '../config/schema.ts';
import { ListFullError, type AdminLists, type ListName } from '../engine/admin-lists.ts';
import type { AdminRoutes } from './admin.ts';
import type { QuotafedEnv } from './env.ts';
import { jsonError } from './json-error.ts';
import { readBodyText } from './read-body.ts';

/** An entry body: an API key may be 64 KiB (identity.maxApiKeyBytes' ceiling), plus its JSON. */
const ENTRY_BODY_LIMIT_BYTES = 80 * 1024;

export interface ListsAdminDeps {
  lists: AdminLists;
  /** The config in force: its `lists` are shown beside the admin entries. */
  policy: { readonly config: Config };
}

function listName(c: Context): ListName | undefined {
  const list = c.req.param('list');
  return list === 'allow' || list === 'deny' ? list : undefined;
}

const badList = () => jsonError(400, 'the list is "allow" or "deny"');

function unavailable(error: unknown): Response {
  return jsonError(503, `the region's Redis did not answer: ${(error as Error).message}`);
}

/**
 * Registers GET /lists, PUT /lists/{allow|deny} and DELETE /lists/{allow|deny}/<entry> on the admin app.
 *
 * @example
 * ```ts
 * const region = await createRegionEngine(config);
 * await startRegionService(config, { adminRoutes: [listsAdminRoutes({ lists: region.lists, policy: { config } })] });
 * ```
 */
export function listsAdminRoutes(deps: ListsAdminDeps): AdminRoutes {
  return (admin: Hono<QuotafedEnv>) => {
    admin.get('/lists', async (c) => {
      let warning: string | undefined;
      try {
        await deps.lists.refresh();
      } catch (error) {
        warning = `the region's Redis did not answer (${(error as Error).message}): admin entries as last read`;
      }
      const { allow, deny } = deps.policy.config.lists;
      const stored = deps.lists.entries();
      return c.json({
        allow: [...allow.map((entry) => ({ ...entry, source: 'config' })), ...stored.allow.map((entry) => ({ ...entry, source: 'admin' }))],
        deny: [...deny.map((entry) => ({ ...entry, source: 'config' })), ...stored.deny.map((entry) => ({ ...entry, source: 'admin' }))],
        refreshMs: deps.policy.config.lists.refreshMs,
        ...(warning ? { warning } : {}),
      });
    });

    admin.put('/lists/:list', async (c) => {
      const list = listName(c);
      if (!list) return badList();
      const body = await readBodyText(c, ENTRY_BODY_LIMIT_BYTES);
      if (!body.ok) return body.response;
      let value: unknown;
      try {
        value = JSON.parse(body.text);
      } catch {
        return jsonError(400, 'Invalid request body', { reasons: ['body is not valid JSON'] });
      }
      const parsed = ListEntry.safeParse(value);
      if (!parsed.success) {
        const reasons = parsed.error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`);
        return jsonError(400, 'Invalid list entry', { reasons });
      }
      try {
        const { added } = await deps.lists.add(list, parsed.data);
        return c.json({ list, entry: parsed.data, added }, added ? 201 : 200);
      } catch (error) {
        if (error instanceof ListFullError) return jsonError(409, error.message);
        return unavailable(error);
      }
    });

    admin.delete('/lists/:list/:entry{.+}', async (c) => {
      const list = listName(c);
      if (!list) return badList();
      const entry = c.req.param('entry');
      try {
        const removed = await deps.lists.remove(list, entry);
        if (removed.length > 0) return c.json({ list, removed });
      } catch (error) {
        return unavailable(error);
      }
      const parsed = parseIpRange(entry);
      const ip = parsed.ok ? parsed.range.text : undefined;
      const inConfig = deps.policy.config.lists[list].some((item) => item.apiKey === entry || (ip !== undefined && item.ip === ip));
      return inConfig
        ? jsonError(409, `that entry is in the config file's lists.${list}: remove it there and reload the policy`)
        : jsonError(404, `no admin entry of the ${list} list has that API key or IP`);
    });
  };
}

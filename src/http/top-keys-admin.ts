// GET /admin/keys/top?rule=<name>&by=denials|consumption&n=10&window=current|previous: the keys this process
// denied (or admitted) most per rule in the rule's current window, from the engine's sketches (src/engine/top-keys.ts).
import { hostname } from 'node:os';
import type { Hono } from 'hono';
import { z } from 'zod';
import type { Config } from '../config/schema.ts';
import type { TopKeys, TopKeysView } from '../engine/top-keys.ts';
import type { AdminRoutes } from './admin.ts';
import type { QuotafedEnv } from './env.ts';

const TopQuery = z.strictObject({
  rule: z.string().min(1).max(64).optional(),
  by: z.enum(['denials', 'consumption']).default('denials'),
  n: z.coerce.number().int().min(1).max(10_000).default(10),
  window: z.enum(['current', 'previous']).default('current'),
});

/** The answer of GET /admin/keys/top. */
export interface TopKeysAnswer {
  region: string;
  /** Whose view: this process's sketches (each gateway process of a region keeps its own). */
  scope: 'process';
  instance: string;
  at: number;
  rules: TopKeysView[];
}

/** What the route reads: the engine's sketches and the rules in force. */
export interface TopKeysDeps {
  readonly topKeys: TopKeys | undefined;
  readonly config: Config;
}

/**
 * Registers GET /keys/top on the admin app (mounted under /admin).
 *
 * @example
 * ```ts
 * await startRegionService(config, { adminRoutes: [topKeysAdminRoutes(engine)] });
 * // curl -H "Authorization: Bearer $TOKEN" 'http://127.0.0.1:8081/admin/keys/top?rule=per-key&by=denials&n=10'
 * ```
 */
export function topKeysAdminRoutes(deps: TopKeysDeps, now: () => number = Date.now): AdminRoutes {
  const instance = `${hostname()}:${process.pid}`;
  return (admin: Hono<QuotafedEnv>) => {
    admin.get('/keys/top', (c) => {
      const parsed = TopQuery.safeParse(c.req.query());
      if (!parsed.success) return c.json({ error: z.prettifyError(parsed.error) }, 400);
      const { topKeys, config } = deps;
      if (topKeys === undefined) return c.json({ error: 'top keys are off (topKeys.enabled: false)' }, 404);
      const query = parsed.data;
      const rules = query.rule === undefined ? config.rules : config.rules.filter((rule) => rule.name === query.rule);
      if (rules.length === 0) {
        return c.json({ error: `no rule "${query.rule}" in force`, rules: config.rules.map((rule) => rule.name) }, 404);
      }
      if (query.n > topKeys.settings.capacity) {
        return c.json({ error: `n must be at most topKeys.capacity (${topKeys.settings.capacity})` }, 400);
      }
      const at = now();
      const answer: TopKeysAnswer = {
        region: config.region,
        scope: 'process',
        instance,
        at,
        rules: rules.map((rule) => topKeys.top(rule, query.by, query.n, query.window, at)),
      };
      return c.json(answer);
    });
  };
}

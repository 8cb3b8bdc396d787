// The federation's admin routes (mounted under /admin):
// GET /admin/federation/keys?rule=…&apiKey=…&ip=…&endpoint=…&method=…  and  GET /admin/federation/peers.
import type { RequestContext } from '../engine/types.ts';
import type { Hono } from 'hono';
import type { Cluster, Redis } from 'ioredis';
import { z } from 'zod';
import type { Config } from '../config/schema.ts';
import { AdminViewError, federationKeyView, federationPeersView } from '../federation/admin-view.ts';
import type { PeerStatus } from '../federation/peers.ts';
import type { AdminRoutes } from './admin.ts';
import type { QuotafedEnv } from './env.ts';

const KeyQuery = z.strictObject({
  rule: z.string().min(1).max(64),
  apiKey: z.string().max(65_536).optional(),
  ip: z.string().max(64).optional(),
  endpoint: z.string().startsWith('/').max(2_048).optional(),
  method: z
    .string()
    .regex(/^[A-Za-z]{1,16}$/)
    .optional(),
});

export interface FederationAdminDeps {
  config: Config;
  /** The region's Redis (read-only use). */
  redis: Redis | Cluster;
  /** Per-peer status; usually `federation.status`. */
  status: () => PeerStatus[];
  /** The caller's plan as a decision sees it (the engine's `withPlan`); the config's plans when omitted. */
  withPlan?: (request: RequestContext) => RequestContext;
}

/** Registers GET /federation/keys and GET /federation/peers on the admin app (mounted under /admin). */
export function federationAdminRoutes(deps: FederationAdminDeps): AdminRoutes {
  return (admin: Hono<QuotafedEnv>) => {
    admin.get('/federation/keys', async (c) => {
      const parsed = KeyQuery.safeParse(c.req.query());
      if (!parsed.success) return c.json({ error: z.prettifyError(parsed.error) }, 400);
      try {
        return c.json(await federationKeyView(deps.config, deps.redis, parsed.data.rule, parsed.data, deps.withPlan));
      } catch (error) {
        if (error instanceof AdminViewError) return c.json({ error: error.message }, error.status);
        throw error;
      }
    });
    admin.get('/federation/peers', (c) => c.json(federationPeersView(deps.config, deps.status())));
  };
}

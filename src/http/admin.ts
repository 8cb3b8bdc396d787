// The admin sub-app. Other modules add routes to it (policy reload, federation status) through
// `AdminRoutes` functions handed to the service; the service mounts it under /admin on the public port,
// or on its own listener when `admin.port` is set (and then never on the public port).
import { createHash, timingSafeEqual } from 'node:crypto';
import { Hono, type MiddlewareHandler } from 'hono';
import type { QuotafedEnv } from './env.ts';
import { jsonError } from './json-error.ts';

export const ADMIN_PREFIX = '/admin';

/**
 * Adds routes to the admin app (paths relative to /admin), which the admin token guards. Pass them to
 * startRegionService as `adminRoutes`.
 *
 * @example
 * ```ts
 * const version: AdminRoutes = (admin) => {
 *   admin.get('/version', (c) => c.json({ version: '1.2.3' }));
 * };
 * await startRegionService(config, { adminRoutes: [version] }); // GET /admin/version
 * ```
 */
export type AdminRoutes = (admin: Hono<QuotafedEnv>) => void;

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Constant time in the token's content and length: both sides are compared as fixed-length digests. */
export function tokenMatches(presented: string | undefined, expected: string): boolean {
  if (presented === undefined) return false;
  return timingSafeEqual(digest(presented), digest(expected));
}

/** Bearer-token guard. With no token configured it closes the routes (403) unless `openWithoutToken`. */
export function requireAdminToken(token: string | undefined, options: { openWithoutToken?: boolean } = {}): MiddlewareHandler<QuotafedEnv> {
  return async (c, next) => {
    if (token === undefined) {
      if (options.openWithoutToken) return next();
      return jsonError(403, 'admin.token is not configured');
    }
    const match = /^Bearer[ \t]+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
    if (!tokenMatches(match?.[1], token)) {
      return new Response(JSON.stringify({ error: 'Unauthorized' }), {
        status: 401,
        headers: { 'Content-Type': 'application/json', 'WWW-Authenticate': 'Bearer realm="quotafed-admin"' },
      });
    }
    return next();
  };
}

export interface AdminAppOptions {
  token: string | undefined;
  /** On a separate (private) listener an operator may run without a token; on the public port never. */
  openWithoutToken: boolean;
  routes: readonly AdminRoutes[];
}

export function createAdminApp(options: AdminAppOptions): Hono<QuotafedEnv> {
  const admin = new Hono<QuotafedEnv>();
  admin.use('*', requireAdminToken(options.token, { openWithoutToken: options.openWithoutToken }));
  for (const register of options.routes) register(admin);
  return admin;
}

// Assembles a region's Hono apps. The public app serves ops routes, /v1/check and, in gateway mode, forwards
// everything else to the upstream behind the limiter. Paths the service owns are never forwarded:
// /healthz, /readyz, /metrics, /v1/check, /v1/release, /v1/auth (nginx auth_request) and /admin/*.
import { Hono } from 'hono';
import type { Registry } from 'prom-client';
import type { Config } from '../config/schema.ts';
import { layoutOf } from '../keys.ts';
import type { DecisionEngine } from '../engine/types.ts';
import type { Logger } from '../log.ts';
import { registry as sharedRegistry } from '../metrics.ts';
import { ADMIN_PREFIX, createAdminApp, requireAdminToken, type AdminRoutes } from './admin.ts';
import { AUTH_REQUEST_PATH, registerAuthRequestRoute } from './auth-request.ts';
import { registerCheckRoutes } from './check.ts';
import type { QuotafedEnv } from './env.ts';
import { errorHandler, notFound } from './errors.ts';
import { canonicalizePath, gatewayHandler, refuseUnforwardable } from './gateway.ts';
import { ruleLookup } from './headers.ts';
import { jsonError } from './json-error.ts';
import { settleTokens } from './settle-token.ts';
import { quotafed } from './middleware.ts';
import { registerHealthRoutes, registerMetricsRoute, type Readiness } from './ops.ts';
import type { AnnotationStore } from '../dashboard/annotations.ts';
import { DASHBOARD_PATH, registerDashboard } from '../dashboard/routes.ts';
import type { DashboardSource } from '../dashboard/types.ts';

export interface RegionAppDeps {
  config: Config;
  engine: DecisionEngine;
  logger: Logger;
  readiness: Readiness;
  /** The rules in force (they follow a policy reload); `config.rules` when absent. */
  policy?: { readonly config: Config };
  adminRoutes?: readonly AdminRoutes[];
  registry?: Registry;
  /** The live dashboard at /dashboard; chaos annotations need the admin token. */
  dashboard?: { source: DashboardSource; annotations: AnnotationStore };
}

const methodNotAllowed = () => jsonError(405, 'Method not allowed');

function baseApp(logger: Logger): Hono<QuotafedEnv> {
  const app = new Hono<QuotafedEnv>();
  app.onError(errorHandler(logger));
  app.notFound(notFound);
  return app;
}

function reserve(app: Hono<QuotafedEnv>, ...paths: string[]): void {
  for (const path of paths) app.all(path, methodNotAllowed);
}

export function createPublicApp(deps: RegionAppDeps): Hono<QuotafedEnv> {
  const { config, engine, logger } = deps;
  const app = baseApp(logger);
  const rules = ruleLookup(() => (deps.policy ?? deps).config.rules);

  registerHealthRoutes(app, deps.readiness);
  reserve(app, '/healthz', '/readyz');
  if (config.admin.port === undefined) {
    registerMetricsRoute(app, deps.registry ?? sharedRegistry);
  }
  reserve(app, '/metrics');

  // The check routes read their bodies with a size cap themselves (413 above CHECK_BODY_LIMIT_BYTES): Hono's
  // bodyLimit would build a full web Request for every POST (src/http/read-body.ts).
  if (config.admin.protectCheck) {
    app.use('/v1/check', requireAdminToken(config.admin.token));
    app.use('/v1/release', requireAdminToken(config.admin.token));
  }
  const settle = { tokens: settleTokens(config.admin.token), ruleOf: rules };
  registerCheckRoutes(app, { engine, identity: config.identity, paths: config.paths, rules, settle, keys: layoutOf(config) });
  reserve(app, '/v1/check', '/v1/release');
  registerAuthRequestRoute(app, {
    engine,
    identity: config.identity,
    requireToken: config.admin.protectCheck ? config.admin.token : undefined,
    paths: config.paths,
    rules,
  });
  reserve(app, AUTH_REQUEST_PATH);

  if (config.admin.port === undefined) {
    app.route(ADMIN_PREFIX, createAdminApp({ token: config.admin.token, openWithoutToken: false, routes: deps.adminRoutes ?? [] }));
  }
  // Unknown admin paths end here: with a separate admin listener, the public port has no admin routes at all.
  app.all(ADMIN_PREFIX, notFound);
  app.all(`${ADMIN_PREFIX}/*`, notFound);

  // Like /metrics, the dashboard moves to the admin listener when there is one.
  if (config.admin.port === undefined) mountDashboard(app, deps);
  reserve(app, DASHBOARD_PATH, `${DASHBOARD_PATH}/*`);

  const upstream = config.upstream.url;
  if (upstream !== undefined) {
    app.all(
      '*',
      refuseUnforwardable,
      canonicalizePath(config.paths, ownedPath),
      quotafed({ engine, identity: config.identity, paths: config.paths, rules }),
      gatewayHandler({ upstreamUrl: upstream, timeoutMs: config.upstream.timeoutMs, identity: config.identity, logger, rules }),
    );
  }
  return app;
}

/** Paths the service answers itself (compared in canonical, lower-case form); they are never forwarded. */
const OWNED_PATHS = ['/healthz', '/readyz', '/metrics', '/v1/check', '/v1/release', AUTH_REQUEST_PATH];
const OWNED_PREFIXES = [ADMIN_PREFIX, DASHBOARD_PATH];
function ownedPath(path: string): boolean {
  const lower = path.toLowerCase().replace(/\/$/, '');
  return OWNED_PATHS.includes(lower) || OWNED_PREFIXES.some((prefix) => lower === prefix || lower.startsWith(`${prefix}/`));
}

/** The live dashboard, when the service runs one; annotations need the admin token. */
function mountDashboard(app: Hono<QuotafedEnv>, deps: RegionAppDeps): void {
  if (!deps.dashboard) return;
  registerDashboard(app, deps.dashboard.source, {
    annotations: deps.dashboard.annotations,
    annotationsGuard: requireAdminToken(deps.config.admin.token),
    onError: (error) => deps.logger.warn({ event: 'dashboard.stream_failed', error: error.message }, 'dashboard stream failed'),
  });
}

/** The app on `admin.port`: admin routes, metrics and health, nothing that decides or forwards. */
export function createAdminListenerApp(deps: RegionAppDeps): Hono<QuotafedEnv> {
  const app = baseApp(deps.logger);
  registerHealthRoutes(app, deps.readiness);
  registerMetricsRoute(app, deps.registry ?? sharedRegistry);
  mountDashboard(app, deps);
  app.route(ADMIN_PREFIX, createAdminApp({ token: deps.config.admin.token, openWithoutToken: true, routes: deps.adminRoutes ?? [] }));
  app.all(`${ADMIN_PREFIX}/*`, notFound);
  return app;
}

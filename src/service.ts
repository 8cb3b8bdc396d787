// One region's service: Redis client → Redis engine → resilient wrapper → Hono apps → listeners.
// Shutdown order matters: stop accepting, let in-flight requests finish, run the shutdown hooks (the
// federation flushes gossip and closes BullMQ there, while Redis is still up), then close Redis.
import { serve } from '@hono/node-server';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config/schema.ts';
import { createRedisEngine } from './engine/redis-engine.ts';
import { createRegionRedis, waitReady, type RegionRedis } from './store/client.ts';
import { createResilientEngine, type ResilientEngine } from './engine/resilient.ts';
import { startTracing } from './engine/tracing.ts';
import type { DecisionEngine } from './engine/types.ts';
import { layoutOf } from './keys.ts';
import type { AdminRoutes } from './http/admin.ts';
import { createAdminListenerApp, createPublicApp, type RegionAppDeps } from './http/app.ts';
import type { Readiness } from './http/ops.ts';
import { regionReadiness } from './http/readiness.ts';
import { guardServer, serverTimeouts } from './http/server-guards.ts';
import { createLogger, type Logger } from './log.ts';
import { createAnnotationStore } from './dashboard/annotations.ts';
import { createDashboardSource } from './dashboard/source.ts';
import { federationAdminRoutes } from './http/federation-admin.ts';
import { keyResetRoutes } from './http/key-reset.ts';
import { listsAdminRoutes } from './http/lists-admin.ts';
import { createAdminLists, type AdminLists } from './engine/admin-lists.ts';
import { createAdminPlans, type AdminPlans } from './engine/admin-plans.ts';
import { createPlanGossip } from './federation/plan-gossip.ts';
import { plansAdminRoutes } from './http/plans-admin.ts';
import { topKeysAdminRoutes } from './http/top-keys-admin.ts';
import { startFederation, type Federation } from './federation/index.ts';
import { startRlsServer } from './grpc/server.ts';
import { configLastReloadSuccessTimestampSeconds, labelRegion, recordConfigReload, registerDefaultMetrics, registry } from './metrics.ts';
import { createPolicyHolder, type Policy } from './policy.ts';
import { tuneV8 } from './v8-tuning.ts';
import { createPolicyReloader, type ReloadResult } from './policy-reload.ts';

export type ShutdownHook = () => Promise<void> | void;

/**
 * Options of {@link startRegionService}: logger, admin routes, what to run (federation, dashboard), policy reload.
 *
 * @example
 * ```ts
 * const service = await startRegionService(config, {
 *   configPath: 'regions/us-east.yaml', // enables policy reload (admin route, SIGHUP)
 *   watchConfig: true,
 *   dashboard: false,
 * });
 * ```
 */
export interface RegionServiceOptions {
  logger?: Logger;
  /** Routes for the admin app (policy reload, federation status…), mounted under /admin. */
  adminRoutes?: AdminRoutes[];
  /** Build the inner engine yourself (benchmarks, experiments); the Redis engine otherwise. */
  createEngine?: (deps: { config: Config; redis: RegionRedis }) => DecisionEngine;
  /** How long shutdown waits for in-flight requests before cutting connections. */
  shutdownTimeoutMs?: number;
  /** Run the federation (gossip, recovery) when peers are configured; default true. */
  federation?: boolean;
  /** Serve the live dashboard at /dashboard; default true. */
  dashboard?: boolean;
  /** The config file the service was started from: enables policy reload (admin route, SIGHUP). */
  configPath?: string;
  /** Also reload when the config file changes. */
  watchConfig?: boolean;
  /** `serve --new-federation`: declare a brand-new federation for this start (as `federation.bootstrap: new`). */
  newFederation?: boolean;
}

/**
 * A running region: its listeners' URLs, its engine and federation, policy reload, and an orderly `close`.
 *
 * @example
 * ```ts
 * const service = await startRegionService(loadConfigFile('regions/us-east.yaml'));
 * console.log(`deciding at ${service.url}/v1/check`);
 * service.onShutdown(() => flushMyQueues());
 * process.once('SIGTERM', () => void service.close());
 * ```
 */
export interface RegionService {
  /** The config the service started with (ports, Redis, peers: what only a restart changes). */
  readonly config: Config;
  /** The policy in force: `policy.config.rules` follow every reload. */
  readonly policy: Policy;
  readonly url: string;
  readonly adminUrl: string | undefined;
  /** host:port of Envoy's rate limit service (gRPC), when `grpc` is configured. */
  readonly grpcAddress: string | undefined;
  readonly logger: Logger;
  readonly redis: RegionRedis;
  readonly engine: ResilientEngine;
  /** The region's federation (idle with no peers, undefined when disabled). */
  readonly federation: Federation | undefined;
  /** Re-read the config file and swap the rules (rejects invalid files and restart-only changes). */
  reloadPolicy(): Promise<ReloadResult>;
  /** Runs at shutdown after in-flight requests finished and before Redis closes, in registration order. */
  onShutdown(hook: ShutdownHook): void;
  close(): Promise<void>;
}

function urlOf(server: Server, host: string): string {
  const { port } = server.address() as AddressInfo;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

function listen(
  fetch: (request: Request, env: never) => Response | Promise<Response>,
  port: number,
  hostname: string,
  settings: Config['server'],
): Promise<Server> {
  return new Promise((resolve, reject) => {
    // Slow-loris guard (server timeouts); Node's own header limit (16 KB) answers oversized headers with 431.
    const server = serve({ fetch: fetch as never, port, hostname, serverOptions: serverTimeouts(settings) }, () =>
      resolve(server as Server),
    ) as Server;
    server.once('error', reject);
    guardServer(server);
  });
}

function closeServer(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/**
 * The region's engine and its Redis client, as createRegionEngine returns them.
 *
 * @example
 * ```ts
 * const region: RegionEngine = await createRegionEngine(config);
 * app.use('/api/*', quotafed({ engine: region.engine }));
 * process.once('SIGTERM', () => void region.close());
 * ```
 */
export interface RegionEngine {
  redis: RegionRedis;
  engine: ResilientEngine;
  /** The allow and deny entries added through the admin API (the region's Redis), matched before every rule. */
  lists: AdminLists;
  /** The plan assignments of the admin API (the region's Redis, gossiped to every region), which win over `plans.keys`. */
  plans: AdminPlans;
  /** Closes the engine and then the Redis connection. */
  close(): Promise<void>;
}

/** The engine the resilient wrapper delegates to: the caller's (`createEngine`) or the Redis engine. */
function innerEngine(options: Pick<RegionServiceOptions, 'createEngine'>, config: Config, redis: RegionRedis): DecisionEngine {
  return options.createEngine ? options.createEngine({ config, redis }) : createRedisEngine({ config, redis });
}

/**
 * The region's decision engine without HTTP: Redis client, Redis engine and the resilient wrapper (breaker, fail
 * modes, local fallback). For apps that embed the middleware; starts degraded, and says so, when Redis is not
 * reachable yet.
 *
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { loadConfigFile } from 'quotafed/engine';
 * import { quotafed, type QuotafedEnv } from 'quotafed/hono';
 * import { createRegionEngine } from 'quotafed/service';
 *
 * const { engine, close } = await createRegionEngine(loadConfigFile('regions/us-east.yaml'));
 * const app = new Hono<QuotafedEnv>();
 * app.use('/api/*', quotafed({ engine }));
 * process.once('SIGTERM', () => void close());
 * ```
 */
export async function createRegionEngine(
  config: Config,
  options: Pick<RegionServiceOptions, 'logger' | 'createEngine'> = {},
): Promise<RegionEngine> {
  const logger = options.logger ?? createLogger({ level: config.logLevel, base: { region: config.region } });
  const redis = createRegionRedis(config);
  let redisUp = false;
  redis.on('error', (error: Error) => logger.debug({ event: 'redis.error', error: error.message }, 'Redis client error'));
  redis.on('ready', () => {
    if (!redisUp) logger.info({ event: 'redis.ready' }, 'Redis connection ready');
    redisUp = true;
  });
  let quitting = false;
  redis.on('close', () => {
    if (redisUp && !quitting) logger.warn({ event: 'redis.closed' }, 'Redis connection lost; reconnecting');
    redisUp = false;
  });
  try {
    await waitReady(redis, config.redis.connectTimeoutMs);
  } catch (error) {
    // Serve anyway: the breaker and the fail modes decide until Redis comes up.
    logger.warn(
      { event: 'redis.unavailable_at_start', error: (error as Error).message },
      'Redis not reachable at startup; starting degraded',
    );
  }
  const lists = createAdminLists({ redis, keys: layoutOf(config), refreshMs: config.lists.refreshMs, logger });
  const plans = createAdminPlans({ redis, keys: layoutOf(config), refreshMs: config.lists.refreshMs, logger });
  // Off unless an OTLP endpoint is configured: then, and only then, the OpenTelemetry SDK is imported.
  const tracer = await startTracing(config);
  if (tracer) logger.info({ event: 'tracing.started' }, 'decision spans exported over OTLP/HTTP');
  const engine = createResilientEngine({
    config,
    inner: innerEngine(options, config, redis),
    probe: () => redis.ping(),
    logger,
    adminLists: lists,
    adminPlans: plans,
    tracer,
  });
  return {
    redis,
    engine,
    lists,
    plans,
    async close() {
      lists.close();
      plans.close();
      await engine.close();
      await tracer
        ?.shutdown()
        .catch((error: Error) => logger.warn({ event: 'tracing.shutdown_failed', error: error.message }, 'span export failed'));
      quitting = true;
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/**
 * One region's whole service: the Redis engine behind the resilient wrapper, the public app (gateway,
 * `/v1/check`, `/v1/auth`), the admin app, the Envoy gRPC service when configured, the federation with its peers
 * and the dashboard. What `quotafed serve` runs.
 *
 * @example
 * ```ts
 * import { loadConfigFile } from 'quotafed/engine';
 * import { startRegionService } from 'quotafed/service';
 *
 * const service = await startRegionService(loadConfigFile('regions/us-east.yaml'), { configPath: 'regions/us-east.yaml' });
 * process.once('SIGTERM', () => void service.close());
 * ```
 */
export async function startRegionService(config: Config, options: RegionServiceOptions = {}): Promise<RegionService> {
  const logger = options.logger ?? createLogger({ level: config.logLevel, base: { region: config.region } });
  // A process that serves a region decides requests all its life: V8 tuned for that (v8-tuning.ts).
  tuneV8();
  registerDefaultMetrics({ eventLoopResolutionMs: config.metrics.eventLoopResolutionMs });
  labelRegion(config.region);
  // The config in force was just loaded: the reload clock starts now.
  configLastReloadSuccessTimestampSeconds.set(Date.now() / 1000);
  const region = await createRegionEngine(config, { logger, createEngine: options.createEngine });
  const { redis, engine } = region;
  // Before the listener opens: recovery decides whether this Redis lost data (and fences) before any decision.
  const federation =
    options.federation === false ? undefined : await startFederation({ config, redis, logger, newFederation: options.newFederation });
  // One holder of the rules in force: the engine and the federation (gossip applies, sweeps and resyncs) take a
  // reload here; the admin view and the dashboard read it at request time.
  const policy = createPolicyHolder(config);
  // The engine decides with the rules in force, held at a peer's tighter terms while that peer runs a rule with
  // other parameters (a reload one region at a time; rule-identity.ts tightenRules).
  const decideWith = (next: Config) => federation?.tighten(next) ?? next;
  const swapEngine = (next: Config) => engine.swap({ config: next, inner: innerEngine(options, next, redis) });
  policy.onChange((next) => swapEngine(decideWith(next)));
  if (federation) {
    policy.onChange((next) => federation.updateRules(next));
    federation.onTightened(() => {
      swapEngine(decideWith(policy.config)).catch((error: Error) =>
        logger.error({ event: 'federation.rules_tighten_failed', error: error.message }, 'could not decide at the tightened rules'),
      );
    });
    if (decideWith(config) !== config) await swapEngine(decideWith(config));
  }
  const adminRoutes = [...(options.adminRoutes ?? []), listsAdminRoutes({ lists: region.lists, policy }), topKeysAdminRoutes(engine)];
  // Plan assignments reach every peer's Redis; those a peer misses are retried from this region's outbox.
  const planGossip =
    federation && config.federation.peers.length > 0
      ? createPlanGossip({ config, redis, logger, retryMs: Math.max(1_000, 5 * config.lists.refreshMs) })
      : undefined;
  adminRoutes.push(plansAdminRoutes({ plans: region.plans, gossip: planGossip, policy, logger }));
  adminRoutes.push(
    keyResetRoutes({
      get config() {
        return policy.config;
      },
      redis,
      forget: (keys) => engine.forget(keys),
      withPlan: (request) => engine.withPlan(request),
      logger,
    }),
  );
  if (federation) {
    adminRoutes.push(
      federationAdminRoutes({
        get config() {
          return policy.config;
        },
        redis,
        status: () => federation.status(),
        withPlan: (request) => engine.withPlan(request),
      }),
    );
  }
  const reloader = options.configPath
    ? createPolicyReloader({ configPath: options.configPath, policy, logger, onResult: (result) => recordConfigReload(result.ok) })
    : undefined;
  if (reloader) {
    adminRoutes.push(reloader.adminRoutes);
    if (options.watchConfig) reloader.watchFile();
  }
  const annotations = createAnnotationStore();
  const dashboardSource =
    options.dashboard === false
      ? undefined
      : createDashboardSource({
          config,
          policy,
          registry,
          annotations,
          redis,
          federation: { status: () => federation?.status() ?? [] },
          breakerState: () => engine.breaker.state,
          topKeys: engine,
          withPlan: (request) => engine.withPlan(request),
          watch: [],
        });

  const readiness: Readiness = regionReadiness({
    config,
    redis,
    breaker: engine.breaker,
    problems: () => federation?.problems() ?? [],
    warnings: () => federation?.warnings() ?? [],
  });

  if (config.admin.protectCheck && config.admin.token === undefined) {
    logger.warn({ event: 'config.warning' }, 'admin.protectCheck is set without admin.token: /v1/check answers 403');
  }

  const deps: RegionAppDeps = {
    config,
    engine,
    logger,
    readiness,
    policy,
    adminRoutes,
    ...(dashboardSource ? { dashboard: { source: dashboardSource, annotations } } : {}),
  };
  const publicServer = await listen(createPublicApp(deps).fetch, config.port, config.host, config.server);
  const adminServer =
    config.admin.port === undefined
      ? undefined
      : await listen(createAdminListenerApp(deps).fetch, config.admin.port, config.host, config.server);
  const rls = config.grpc ? await startRlsServer({ engine, grpc: config.grpc, host: config.host, logger }) : undefined;
  const url = urlOf(publicServer, config.host);
  const adminUrl = adminServer ? urlOf(adminServer, config.host) : undefined;
  logger.info(
    { event: 'service.listening', url, adminUrl, upstream: config.upstream.url ?? null, rules: config.rules.map((r) => r.name) },
    'quotafed region service listening',
  );

  // Gossip flushes and BullMQ closes while Redis is still up; then the dashboard's probes stop.
  const hooks: ShutdownHook[] = [];
  if (reloader) hooks.push(() => reloader.close());
  if (federation) hooks.push(() => federation.close());
  if (planGossip) hooks.push(() => planGossip.close());
  if (dashboardSource) hooks.push(() => dashboardSource.close());
  let closing: Promise<void> | undefined;
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 10_000;

  return {
    config,
    policy,
    url,
    adminUrl,
    grpcAddress: rls?.address,
    logger,
    redis,
    engine,
    federation,
    reloadPolicy: () =>
      reloader ? reloader.reload() : Promise.resolve({ ok: false as const, error: 'started without a config file', fields: [] }),
    onShutdown(hook) {
      hooks.push(hook);
    },
    close() {
      closing ??= (async () => {
        logger.info({ event: 'service.stopping' }, 'stopping: no new connections, finishing in-flight requests');
        await Promise.all([
          ...[publicServer, adminServer].filter((s): s is Server => s !== undefined).map((s) => closeServer(s, shutdownTimeoutMs)),
          rls?.close(shutdownTimeoutMs),
        ]);
        for (const hook of hooks) {
          try {
            await hook();
          } catch (error) {
            logger.error({ event: 'service.shutdown_hook_failed', error: (error as Error).message }, 'shutdown hook failed');
          }
        }
        await region.close();
        logger.info({ event: 'service.stopped' }, 'stopped');
      })();
      return closing;
    },
  };
}

// Liveness, readiness and metrics. /healthz says the process serves HTTP; /readyz says Redis answers and the
// breaker is closed (a load balancer may prefer another instance while this one is degraded).
import type { Hono } from 'hono';
import type { Registry } from 'prom-client';
import type { QuotafedEnv } from './env.ts';

/** Reasons the instance is not ready; empty when it is. */
export type Readiness = () => Promise<string[]>;

export function registerHealthRoutes(app: Hono<QuotafedEnv>, readiness: Readiness): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const reasons = await readiness();
    return reasons.length === 0 ? c.json({ status: 'ready' }) : c.json({ status: 'not ready', reasons }, 503);
  });
}

export function registerMetricsRoute(app: Hono<QuotafedEnv>, registry: Registry): void {
  app.get('/metrics', async (c) => c.body(await registry.metrics(), 200, { 'Content-Type': registry.contentType }));
}

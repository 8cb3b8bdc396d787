// Liveness, readiness and metrics. /healthz says the process serves HTTP; /readyz says this instance can answer
// as its fail modes say (src/http/readiness.ts), with Redis's health and the breaker's state in the body.
import type { Hono } from 'hono';
import type { Registry } from 'prom-client';
import type { QuotafedEnv } from './env.ts';

/** Why the instance is not ready (empty when it is), and what /readyz shows beside the status. */
export interface ReadinessReport {
  reasons: string[];
  [detail: string]: unknown;
}

export type Readiness = () => Promise<ReadinessReport>;

export function registerHealthRoutes(app: Hono<QuotafedEnv>, readiness: Readiness): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const { reasons, ...details } = await readiness();
    return reasons.length === 0 ? c.json({ status: 'ready', ...details }) : c.json({ status: 'not ready', reasons, ...details }, 503);
  });
}

export function registerMetricsRoute(app: Hono<QuotafedEnv>, registry: Registry): void {
  app.get('/metrics', async (c) => c.body(await registry.metrics(), 200, { 'Content-Type': registry.contentType }));
}

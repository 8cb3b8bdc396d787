// POST /admin/keys/reset (mounted under /admin): the body of POST /v1/check, plus an optional `rule` (only that
// rule's state) and `federation` (true: in every region, else in this one). It deletes the state the request is
// counted against, forgets this process's cached denials of it, logs and counts the reset, and answers what it
// did per rule and region.
import type { Hono } from 'hono';
import type { Cluster, Redis } from 'ioredis';
import { z } from 'zod';
import type { Config } from '../config/schema.ts';
import { matchRules } from '../engine/rules.ts';
import type { RequestContext } from '../engine/types.ts';
import { resetStateKeys } from '../federation/key-reset.ts';
import type { Logger } from '../log.ts';
import { keyResetsTotal } from '../metrics.ts';
import type { AdminRoutes } from './admin.ts';
import { checkBodySchema, checkRequest, readJson, reasons } from './check.ts';
import type { QuotafedEnv } from './env.ts';
import { jsonError } from './json-error.ts';

export interface KeyResetDeps {
  /** The rules in force (read per request: a policy reload changes them). */
  readonly config: Config;
  /** The region's Redis. */
  redis: Redis | Cluster;
  /** Forget this process's cached denials of the keys (the engine's `forget`). */
  forget: (keys: readonly string[]) => void;
  /** The request with the caller's plan (the engine's `withPlan`): a plan-aware rule resets the plan's state. */
  withPlan?: (request: RequestContext) => RequestContext;
  logger: Logger;
}

/**
 * Registers POST /keys/reset on the admin app.
 *
 * @example
 * ```ts
 * // curl -X POST localhost:8080/admin/keys/reset -H 'Authorization: Bearer …' \
 * //   -d '{"apiKey":"api-key-42","method":"GET","path":"/search","federation":true}'
 * adminRoutes.push(keyResetRoutes({ config, redis, forget: (keys) => engine.forget(keys), logger }));
 * ```
 */
export function keyResetRoutes(deps: KeyResetDeps): AdminRoutes {
  return (admin: Hono<QuotafedEnv>) => {
    admin.post('/keys/reset', async (c) => {
      const config = deps.config;
      const schema = checkBodySchema(config.identity, config.paths).extend({
        rule: z.string().min(1).max(64).optional(),
        federation: z.boolean().optional(),
      });
      const body = await readJson(c);
      if (!body.ok) return body.response;
      const parsed = schema.safeParse(body.value);
      if (!parsed.success) return jsonError(400, 'Invalid request body', { reasons: reasons(parsed.error) });
      const built = checkRequest(c, parsed.data, config.identity);
      if (!built.ok) return jsonError(400, built.reason);
      const { rule, federation = false } = parsed.data;
      if (rule !== undefined && !config.rules.some((candidate) => candidate.name === rule)) {
        return jsonError(400, `no rule named "${rule}"`);
      }
      const request = deps.withPlan ? deps.withPlan(built.request) : built.request;
      const matched = matchRules(config, request).filter((entry) => rule === undefined || entry.rule.name === rule);
      if (matched.length === 0) {
        return jsonError(400, rule === undefined ? 'no rule counts this request' : `rule "${rule}" does not count this request`);
      }
      const keys = matched.map((entry) => entry.key);
      const timeoutMs = Math.max(config.redis.commandTimeoutMs, config.redis.connectTimeoutMs);
      const regions = await resetStateKeys(config, deps.redis, keys, {
        everywhere: federation && config.federation.peers.length > 0,
        timeoutMs,
        // Longer than gossip stays in flight: a job waits in a peer's queue at most a few sync intervals, or a
        // partition's length (the sender then resends from the current state, changed after the mark).
        markMs: Math.max(120_000, 20 * config.federation.syncIntervalMs),
      });
      deps.forget(keys);
      const scope = federation ? 'federation' : 'region';
      for (const entry of matched) keyResetsTotal.inc({ rule: entry.rule.name, scope });
      deps.logger.warn(
        { event: 'keys.reset', scope, rules: matched.map((entry) => entry.rule.name), keys, regions },
        'operator reset: the state of these keys is gone; their window may admit up to another limit + budget',
      );
      return c.json({
        scope,
        rules: matched.map((entry) => ({ rule: entry.rule.name, key: entry.key })),
        regions,
        complete: regions.every((region) => region.error === undefined),
        note: 'Every region that forgot these keys may admit its allowance again: this window may admit up to another limit + leakage budget.',
      });
    });
  };
}

// The plan assignments' admin routes (mounted under /admin, behind the admin token; docs/plans.md):
//   GET    /admin/plans/<apiKey>   the key's plan now, where it comes from (admin, config, default, none) and its transition
//   PUT    /admin/plans/<apiKey>   body {"plan": "pro"}: assigns the plan, in this region and then in every peer
//   DELETE /admin/plans/<apiKey>   drops the admin assignment: the key is back on the config's plan (or the default)
// A write is stored in this region's Redis (src/engine/admin-plans.ts) and sent to every peer
// (src/federation/plan-gossip.ts); a peer that does not answer gets it when it is back. The answer says which did.
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import type { Config } from '../config/schema.ts';
import type { AdminPlans } from '../engine/admin-plans.ts';
import { choosePlan, configuredPlan, longestTransitionMs, type PlanAssignment } from '../engine/plans.ts';
import type { PlanDelivery, PlanGossip } from '../federation/plan-gossip.ts';
import type { Logger } from '../log.ts';
import type { AdminRoutes } from './admin.ts';
import { readJson, reasons } from './check.ts';
import type { QuotafedEnv } from './env.ts';
import { jsonError } from './json-error.ts';

export interface PlansAdminDeps {
  plans: AdminPlans;
  /** Sends a write to the peers; absent without a federation. */
  gossip?: Pick<PlanGossip, 'deliver'> | undefined;
  /** The config in force (read per request: a reload changes the tiers). */
  policy: { readonly config: Config };
  logger: Logger;
  now?: () => number;
}

/** Where a key's plan comes from. */
type PlanSource = 'admin' | 'config' | 'default' | 'none';

function describe(config: Config, plans: AdminPlans, apiKey: string, now: number) {
  const assignment = plans.assignment(apiKey);
  const choice = choosePlan(config, assignment, apiKey, now);
  const admin = assignment !== undefined && assignment.plan !== null && choice.plan === assignment.plan;
  const source: PlanSource = admin
    ? 'admin'
    : Object.hasOwn(config.plans.keys, apiKey)
      ? 'config'
      : config.plans.default !== undefined
        ? 'default'
        : 'none';
  return {
    plan: choice.plan ?? null,
    source,
    ...(assignment
      ? { assignment: { plan: assignment.plan, previous: assignment.previous, at: assignment.at, region: assignment.region } }
      : {}),
    ...(choice.changedAt !== undefined
      ? { transition: { from: choice.previous ?? null, until: choice.changedAt + longestTransitionMs(config) } }
      : {}),
  };
}

function apiKeyOf(c: Context, config: Config): string | Response {
  const apiKey = c.req.param('apiKey') ?? '';
  if (apiKey === '') return jsonError(400, 'the API key goes in the path: /admin/plans/<apiKey>');
  if (Buffer.byteLength(apiKey, 'utf8') > config.identity.maxApiKeyBytes)
    return jsonError(400, `the API key is longer than identity.maxApiKeyBytes (${config.identity.maxApiKeyBytes})`);
  return apiKey;
}

const unavailable = (error: unknown) => jsonError(503, `the region's Redis did not answer: ${(error as Error).message}`);

/**
 * Registers GET, PUT and DELETE /plans/<apiKey> on the admin app.
 *
 * @example
 * ```ts
 * // curl -X PUT localhost:8080/admin/plans/partner-key -H 'Authorization: Bearer …' -d '{"plan":"pro"}'
 * adminRoutes.push(plansAdminRoutes({ plans: region.plans, gossip, policy, logger }));
 * ```
 */
export function plansAdminRoutes(deps: PlansAdminDeps): AdminRoutes {
  const now = deps.now ?? Date.now;

  /** Stores a write here and sends it to the peers; the answer's regions part. */
  const write = async (apiKey: string, plan: string | null, config: Config) => {
    const held = deps.plans.assignment(apiKey);
    const previous = choosePlan(config, held, apiKey, now()).plan ?? null;
    // Newer than what this region holds, whatever the clocks: the operator's last word here wins.
    const assignment: PlanAssignment = { plan, previous, at: Math.max(now(), (held?.at ?? 0) + 1), region: config.region };
    await deps.plans.put(apiKey, assignment);
    const peers: PlanDelivery[] =
      (await deps.gossip
        ?.deliver(apiKey, assignment)
        .catch((error: unknown) =>
          config.federation.peers.map((peer) => ({ region: peer.name, stored: false, error: (error as Error).message })),
        )) ?? [];
    const regions = [{ region: config.region, stored: true }, ...peers];
    deps.logger.info(
      { event: 'plans.assigned', plan, previous, at: assignment.at, regions },
      plan === null ? 'plan assignment removed' : 'plan assigned',
    );
    return { held, assignment, regions, complete: regions.every((region) => region.stored) };
  };

  return (admin: Hono<QuotafedEnv>) => {
    admin.get('/plans/:apiKey{.+}', async (c) => {
      const config = deps.policy.config;
      const apiKey = apiKeyOf(c, config);
      if (typeof apiKey !== 'string') return apiKey;
      let warning: string | undefined;
      try {
        await deps.plans.refresh();
      } catch (error) {
        warning = `the region's Redis did not answer (${(error as Error).message}): assignments as last read`;
      }
      return c.json({ ...describe(config, deps.plans, apiKey, now()), ...(warning ? { warning } : {}) });
    });

    admin.put('/plans/:apiKey{.+}', async (c) => {
      const config = deps.policy.config;
      const apiKey = apiKeyOf(c, config);
      if (typeof apiKey !== 'string') return apiKey;
      const body = await readJson(c);
      if (!body.ok) return body.response;
      const tiers = Object.keys(config.plans.tiers);
      const parsed = z.strictObject({ plan: z.string().min(1).max(64) }).safeParse(body.value);
      if (!parsed.success) return jsonError(400, 'Invalid request body', { reasons: reasons(parsed.error) });
      const { plan } = parsed.data;
      if (!tiers.includes(plan)) {
        return jsonError(400, `no plan "${plan}" in plans.tiers`, { reasons: [`plan: known plans are ${tiers.join(', ') || 'none'}`] });
      }
      try {
        await deps.plans.refresh();
        const { held, assignment, regions, complete } = await write(apiKey, plan, config);
        const created = held === undefined || held.plan === null;
        return c.json(
          {
            plan,
            previous: assignment.previous,
            at: assignment.at,
            created,
            transitionMs: assignment.previous === plan ? 0 : longestTransitionMs(config),
            regions,
            complete,
            note: 'Until the transition ends the key is decided under both its previous and its new plan (docs/plans.md).',
          },
          created ? 201 : 200,
        );
      } catch (error) {
        return unavailable(error);
      }
    });

    admin.delete('/plans/:apiKey{.+}', async (c) => {
      const config = deps.policy.config;
      const apiKey = apiKeyOf(c, config);
      if (typeof apiKey !== 'string') return apiKey;
      try {
        await deps.plans.refresh();
        const held = deps.plans.assignment(apiKey);
        if (held === undefined || held.plan === null) {
          return jsonError(404, 'no admin assignment for that API key: its plan comes from the config (plans.keys or plans.default)');
        }
        const { assignment, regions, complete } = await write(apiKey, null, config);
        return c.json({
          deleted: true,
          plan: configuredPlan(config.plans, apiKey) ?? null,
          previous: assignment.previous,
          at: assignment.at,
          regions,
          complete,
        });
      } catch (error) {
        return unavailable(error);
      }
    });
  };
}

// Per-key views of the keys the dashboard watches. The federation's admin view (src/federation/admin-view.ts)
// decodes a key's state; this module only picks the current window and the numbers the page draws.
import type { RequestContext } from '../engine/types.ts';
import type { Config } from '../config/schema.ts';
import type { Policy } from '../policy.ts';
import type { RegionRedis } from '../store/client.ts';
import { federationKeyView, type KeyView as AdminKeyView } from '../federation/admin-view.ts';
import { resolveLeakageBudget, ruleFederationParams, topologyOf, windowBase } from '../protocol/index.ts';
import type { KeyView } from './types.ts';

/** A key to watch, named the way a request names it. */
export interface WatchedKey {
  rule: string;
  apiKey?: string;
  ip?: string;
  /** Request path (for endpoint-keyed rules); "/" when omitted. */
  path?: string;
  method?: string;
  /** Shown on the page instead of the rule name (never the raw API key unless you put it here). */
  label?: string;
}

/** The dashboard's numbers for one key, from the admin view, for the window (or epoch) holding `nowMs`. */
export function dashboardKeyView(config: Config, watch: WatchedKey, view: AdminKeyView, nowMs: number): KeyView {
  const rule = config.rules.find((candidate) => candidate.name === view.rule)!;
  const topology = topologyOf(config);
  const windowId = Math.floor(nowMs / rule.period);
  const window = view.windows.find((candidate) => candidate.id === windowId);
  const consumption = window?.consumption ?? {};
  const isBucket = rule.algorithm === 'tokenBucket';
  // A bucket's allowance is what it holds: tokens it may spend without hearing from anyone.
  const bucketTokens = view.bucket?.tokens;
  const allowance = isBucket
    ? bucketTokens === null || bucketTokens === undefined
      ? null
      : Math.floor(bucketTokens)
    : window
      ? (window.allowance[config.region] ?? null)
      : null;
  return {
    label: watch.label ?? rule.name,
    rule: rule.name,
    algorithm: rule.algorithm,
    limit: rule.limit,
    budget: resolveLeakageBudget(rule.limit, rule.leakageBudget ?? config.federation.leakageBudget, topology.regions.length),
    windowId,
    own: window?.own ?? 0,
    global: window?.globalView ?? 0,
    views: topology.regions.map((region) => ({ region, consumed: consumption[region] ?? 0 })),
    allowance: allowance ?? (isBucket || window ? null : emptyWindowAllowance(config, rule.name, windowId)),
    acknowledged: topology.regions.length > 1 && !isBucket ? (window?.acknowledged ?? 0) : null,
  };
}

/** Before the first admission of a window the admin view has no slot for it: the allowance is the base share. */
function emptyWindowAllowance(config: Config, ruleName: string, windowId: number): number | null {
  const rule = config.rules.find((candidate) => candidate.name === ruleName)!;
  const topology = topologyOf(config);
  const params = ruleFederationParams(config, rule);
  const base = windowBase(params, topology.selfIndex, windowId);
  return Number.isFinite(base) ? base : null;
}

/** Reads the watched keys under the rules in force (`policy.config` at each call, so a reload is followed). */
export function createKeyViewReader(policy: Policy, redis: RegionRedis, withPlan?: (request: RequestContext) => RequestContext) {
  return async (watched: readonly WatchedKey[], nowMs: number): Promise<KeyView[]> => {
    const { config } = policy;
    const views = await Promise.all(
      watched.map(async (watch) => {
        try {
          const view = await federationKeyView(
            config,
            redis,
            watch.rule,
            {
              apiKey: watch.apiKey,
              ip: watch.ip,
              endpoint: watch.path,
              method: watch.method,
            },
            withPlan,
          );
          return dashboardKeyView(config, watch, view, nowMs);
        } catch {
          // A key whose rule no longer applies, or a Redis that is down: the page shows the others.
          return undefined;
        }
      }),
    );
    return views.filter((view): view is KeyView => view !== undefined);
  };
}

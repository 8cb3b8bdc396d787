// The dashboard's data source for a running region: metrics from the prom-client registry, link health from
// the federation (and PINGs to peers' Redis), per-key views of a few watched keys, and the chaos annotations.
// One snapshot is shared by every open page: concurrent calls within `minIntervalMs` get the same one.
import type { RequestContext } from '../engine/types.ts';
import type { Registry } from 'prom-client';
import type { Config } from '../config/schema.ts';
import type { RegionRedis } from '../store/client.ts';
import type { Policy } from '../policy.ts';
import { topologyOf } from '../protocol/index.ts';
import type { Annotations, AnnotationStore } from './annotations.ts';
import { createKeyViewReader, type WatchedKey } from './key-view.ts';
import { createLinkProbe, type FederationStatusLike } from './links.ts';
import { createMetricsReader } from './metrics-reader.ts';
import type { TopKeys } from '../engine/top-keys.ts';
import type { BreakerView, DashboardSnapshot, DashboardSource, KeyView, RuleView, TopLimitedKey } from './types.ts';

/** Keys per rule in the dashboard's table of the most denied keys. */
export const TOP_LIMITED_PER_RULE = 5;

export interface DashboardSourceOptions {
  /** The region's config (name, peers, sync interval: what only a restart changes). */
  config: Config;
  /** The policy in force (rules, budgets), read at every snapshot; `config` when omitted. */
  policy?: Policy;
  registry: Registry;
  annotations: AnnotationStore;
  /** The region's Redis: backlog depth and the watched keys' state. */
  redis?: RegionRedis;
  /** The running federation (`startFederation(...)`): per-peer last heard, sync lag, backlog. */
  federation?: FederationStatusLike;
  /** The live breaker state (engine.breaker.state); the registry gauge otherwise. */
  breakerState?: () => 'closed' | 'open';
  /** Keys whose federated views the page shows (a chaos run can add its own through the annotations). */
  watch?: readonly WatchedKey[];
  /** Replaces the built-in key reader (the federation's admin view of each watched key). */
  keyViews?: (watched: readonly WatchedKey[], nowMs: number) => Promise<KeyView[]>;
  /** The caller's plan as a decision sees it (the engine's `withPlan`), for the watched keys' views. */
  withPlan?: (request: RequestContext) => RequestContext;
  /** The engine whose sketches give the most denied keys (`engine.topKeys`); none shown when omitted. */
  topKeys?: { readonly topKeys: TopKeys | undefined };
  /** PING peers' Redis to tell up from down (default true). */
  probePeers?: boolean;
  minIntervalMs?: number;
  now?: () => number;
}

function withoutWatch({ watch: _watch, ...rest }: Annotations): Omit<Annotations, 'watch'> {
  return rest;
}

function ruleViews(config: Config, falseDenials: ReadonlyMap<string, number>, stranded: ReadonlyMap<string, number>): RuleView[] {
  return config.rules.map((rule) => ({
    name: rule.name,
    algorithm: rule.algorithm,
    limit: rule.limit,
    periodMs: rule.period,
    endpoints: rule.match.endpoints ?? null,
    by: rule.by,
    failMode: rule.failMode,
    shadow: rule.shadow,
    falseDenials: falseDenials.get(rule.name) ?? 0,
    stranded: stranded.get(rule.name) ?? 0,
  }));
}

/** The most denied keys of each rule in its current window, from the engine's sketches. */
export function topLimitedKeys(topKeys: TopKeys | undefined, config: Config, nowMs: number): TopLimitedKey[] {
  if (topKeys === undefined) return [];
  return config.rules.flatMap((rule) => {
    const view = topKeys.top(rule, 'denials', TOP_LIMITED_PER_RULE, 'current', nowMs);
    return view.entries.map((entry) => ({
      rule: rule.name,
      key: entry.key,
      denials: entry.count,
      error: entry.error,
      ruleDenials: view.total,
      windowEndMs: view.window.endMs,
    }));
  });
}

export interface ClosableDashboardSource extends DashboardSource {
  close(): Promise<void>;
}

export function createDashboardSource(options: DashboardSourceOptions): ClosableDashboardSource {
  const { config } = options;
  const policy: Policy = options.policy ?? { config };
  const now = options.now ?? Date.now;
  const topology = topologyOf(config);
  const metrics = createMetricsReader(options.registry, config.region, now);
  const probe = createLinkProbe({
    config,
    topology,
    redis: options.redis,
    federation: options.federation,
    probePeers: options.probePeers,
    now,
  });
  const keyViews = options.keyViews ?? (options.redis ? createKeyViewReader(policy, options.redis, options.withPlan) : async () => []);
  const configured = options.watch ?? [];
  const minIntervalMs = options.minIntervalMs ?? 500;
  const federated = topology.regions.length > 1;

  let last: { at: number; snapshot: Promise<DashboardSnapshot> } | undefined;

  const take = async (): Promise<DashboardSnapshot> => {
    const at = now();
    const annotations = options.annotations.current();
    const watched = [...configured, ...(annotations?.watch ?? [])];
    const [reading, keys] = await Promise.all([metrics.read(), watched.length > 0 ? keyViews(watched, at).catch(() => []) : []]);
    const links = await probe.links(reading.syncLagMs);
    const breaker: BreakerView = options.breakerState ? { ...reading.breaker, state: options.breakerState() } : reading.breaker;
    return {
      at,
      region: config.region,
      regions: topology.regions.map((name, index) => ({ name, self: index === topology.selfIndex, weight: topology.weights[index]! })),
      links,
      endpoints: reading.endpoints,
      breaker,
      keys,
      rules: ruleViews(policy.config, reading.falseDenials, reading.stranded),
      topLimited: topLimitedKeys(options.topKeys?.topKeys, policy.config, at),
      annotations: annotations === null ? null : withoutWatch(annotations),
      syncIntervalMs: federated ? config.federation.syncIntervalMs : null,
    };
  };

  return {
    snapshot() {
      const at = now();
      if (last === undefined || at - last.at >= minIntervalMs) {
        const snapshot = take();
        last = { at, snapshot };
        // A failed snapshot must not be served to the next caller.
        snapshot.catch(() => {
          if (last?.snapshot === snapshot) last = undefined;
        });
      }
      return last.snapshot;
    },
    close: () => probe.close(),
  };
}

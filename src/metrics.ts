// The shared Prometheus registry and the decision metrics. Other modules (federation, gossip) register their
// metrics on `registry` too, so `/metrics` shows one consistent page.
//
// Label values are always bounded: rule names and endpoint route patterns come from the config, never from
// the request (a raw path or an API key as a label would let a client grow the registry without bound).
//
// Every series carries `region`: the registry's default label, set once when a region's service starts
// (labelRegion). Metrics that several regions in one process write separately (the breaker, the federation's
// per-peer series) also name it explicitly, with the same value; an explicit label wins over the default.
import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EVENT_LOOP_RESOLUTION_MS } from './config/observability.ts';
import { createTally } from './metric-tally.ts';

/**
 * The registry every quotafed metric is on (`quotafed_decisions_total`, `quotafed_http_429_total`, ...). Serve it
 * from your own `/metrics`, or merge it with your app's registry.
 *
 * @example
 * ```ts
 * import { registry } from 'quotafed';
 *
 * app.get('/metrics', async (c) => c.text(await registry.metrics(), 200, { 'content-type': registry.contentType }));
 * ```
 */
export const registry = new Registry();

/** Puts `region` on every series of the registry (its default labels). A process runs one region's service. */
export function labelRegion(region: string): void {
  registry.setDefaultLabels({ region });
}

/** The package version, from package.json beside src/ (and beside dist/ once built). */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export const buildInfo = new Gauge({
  name: 'quotafed_build_info',
  help: 'Always 1; the labels say which quotafed (version) runs on which Node.js (node_version).',
  labelNames: ['version', 'node_version'] as const,
  registers: [registry],
});
buildInfo.set({ version: packageVersion(), node_version: process.version }, 1);

export const configReloadsTotal = new Counter({
  name: 'quotafed_config_reloads_total',
  help: 'Policy reloads (admin route, SIGHUP, file watch) by result: success (in force, changed or not) or failure (rejected; the old policy stays).',
  labelNames: ['result'] as const,
  registers: [registry],
});
configReloadsTotal.inc({ result: 'success' }, 0);
configReloadsTotal.inc({ result: 'failure' }, 0);

export const configLastReloadSuccessTimestampSeconds = new Gauge({
  name: 'quotafed_config_last_reload_success_timestamp_seconds',
  help: 'Unix time (s) the config in force was last loaded successfully: at start-up, then at each successful reload.',
  registers: [registry],
});
configLastReloadSuccessTimestampSeconds.set(Date.now() / 1000);

/** Counts one policy reload and, when it succeeded, stamps its time. */
export function recordConfigReload(ok: boolean, nowMs = Date.now()): void {
  configReloadsTotal.inc({ result: ok ? 'success' : 'failure' });
  if (ok) configLastReloadSuccessTimestampSeconds.set(nowMs / 1000);
}

let defaultsRegistered = false;
/**
 * The process metrics (CPU, memory, event loop lag, GC, as `quotafed_process_*` / `quotafed_nodejs_*`). The regional
 * service registers them when it starts; importing quotafed as a library (createLimiter, the middleware) does not,
 * so an app that embeds it keeps its own process metrics. Idempotent. `eventLoopResolutionMs`: how often the event-loop
 * lag samples (the config's `metrics.eventLoopResolutionMs`; 100 ms unless given).
 *
 * @example
 * ```ts
 * import { registerDefaultMetrics, registry } from 'quotafed';
 *
 * registerDefaultMetrics(); // only if your app does not collect process metrics itself
 * const page = await registry.metrics();
 * ```
 */
export function registerDefaultMetrics(options: { eventLoopResolutionMs?: number } = {}): void {
  if (defaultsRegistered) return;
  defaultsRegistered = true;
  collectDefaultMetrics({
    register: registry,
    prefix: 'quotafed_',
    eventLoopMonitoringPrecision: options.eventLoopResolutionMs ?? EVENT_LOOP_RESOLUTION_MS,
  });
}

/** Endpoint label for requests that matched no endpoint-scoped rule. */
export const OTHER_ENDPOINT = '(other)';

/** Sub-5 ms resolution: the seed's limiter budget is p99 < 5 ms, so the buckets must resolve below it. */
const FAST_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
];

/** quotafed_decisions_total's increments on the decision path, added to it as it is read (metric-tally.ts). */
export const decisionsTally = createTally(['rule', 'endpoint', 'outcome', 'source'] as const);

export const decisionsTotal = new Counter({
  name: 'quotafed_decisions_total',
  help:
    'Rule decisions by rule, endpoint (route pattern), outcome (allowed|limited|shadow_limited) and source ' +
    '(redis|cache|fail-open|fail-closed|local-fallback).',
  labelNames: ['rule', 'endpoint', 'outcome', 'source'] as const,
  registers: [registry],
  collect() {
    decisionsTally.drainInto(this);
  },
});

/** quotafed_http_429_total's increments on the answer path, added to it as it is read (metric-tally.ts). */
export const rejectionsTally = createTally(['endpoint'] as const);

export const rejectionsTotal = new Counter({
  name: 'quotafed_http_429_total',
  help:
    'HTTP 429 answers by endpoint route pattern: sent by quotafed, or by nginx / Envoy on its denial (/v1/auth 403, RLS ' +
    'OVER_LIMIT; endpoint envoy:<domain>).',
  labelNames: ['endpoint'] as const,
  registers: [registry],
  collect() {
    rejectionsTally.drainInto(this);
  },
});

export const listMatchesTotal = new Counter({
  name: 'quotafed_list_matches_total',
  help:
    'Requests decided by an allow or deny list before any rule, by list (allow|deny) and the kind of entry that ' +
    'matched (apiKey|ip). An allowed one made no Redis call; a denied one got 403 (Envoy: OVER_LIMIT).',
  labelNames: ['list', 'kind'] as const,
  registers: [registry],
});

export const falseDenialsTotal = new Counter({
  name: 'quotafed_federation_false_denials_total',
  help:
    "Federated denials while this region's own view showed federation headroom: a window's allowance denied " +
    "although G + cost <= L, a bucket lacked local tokens although the epoch's use + cost <= min(C, L) - the previous epoch's use + L x elapsed/P " +
    '(docs/federation.md section 4).',
  labelNames: ['rule'] as const,
  registers: [registry],
});

export const parkedTotal = new Counter({
  name: 'quotafed_federation_parked_total',
  help:
    'Requests parked on a false denial of a rule with maxWaitMs, by how the wait ended: admitted (a grant came in ' +
    'time) or denied (the wait ran out, or the denial became a true one).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const timeToGrantSeconds = new Histogram({
  name: 'quotafed_federation_time_to_grant_seconds',
  help:
    "From a key's first false denial in a window/epoch in this region to its next admission here in that " +
    "window/epoch (allowance moved by a peer, or a bucket's own refill).",
  labelNames: ['rule'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30, 60],
  registers: [registry],
});

export const localLeaseUnitsTotal = new Counter({
  name: 'quotafed_local_lease_units_total',
  help:
    'Units of local leases (rules[].lease), by rule and event: taken (counted in Redis with a decision), returned (given back ' +
    'unspent when the lease ended) or return_failed (not given back: they stay spent). Admissions from a lease are ' +
    'quotafed_decisions_total with source="lease".',
  labelNames: ['rule', 'event'] as const,
  registers: [registry],
});

export const responseRefundsTotal = new Counter({
  name: 'quotafed_response_refunds_total',
  help:
    'Admissions refunded (in whole or in part) once the answer was known, by rule: rules[].countResponses does not count that answer ' +
    '(failed or successful), or a rules[].costFromResponse rule reserved more than the answer reported.',
  labelNames: ['rule'] as const,
  registers: [registry],
});

export const responseCostsTotal = new Counter({
  name: 'quotafed_response_costs_total',
  help:
    'Answers to admissions of rules[].costFromResponse rules, by rule and how their cost report turned out: reported (the reserve less the ' +
    'reported cost refunded), missing (no or a garbled cost header: the whole reserve charged) or overrun (above the reserve: the reserve charged).',
  labelNames: ['rule', 'outcome'] as const,
  registers: [registry],
});

export const responseCostOverrunTotal = new Counter({
  name: 'quotafed_response_cost_overrun_total',
  help: 'Units answers of rules[].costFromResponse rules reported beyond the reserve, by rule: never charged (the reserve is the most one request costs).',
  labelNames: ['rule'] as const,
  registers: [registry],
});

export const peeksTotal = new Counter({
  name: 'quotafed_peeks_total',
  help: 'Decisions answered without spending anything (POST /v1/check with "consume": false, limiter.peek), by rule and what the decision would be.',
  labelNames: ['rule', 'outcome'] as const,
  registers: [registry],
});

export const unlimitedDecisionsTotal = new Counter({
  name: 'quotafed_unlimited_decisions_total',
  help: "Decisions a rule skipped as unlimited, nothing counted: Envoy descriptors of an unlimited rule (envoyproxy/ratelimit's unlimited: true; endpoint envoy:<domain>) and API keys on an unlimited plan (docs/plans.md; the plan-aware rule), by rule and endpoint.",
  labelNames: ['rule', 'endpoint'] as const,
  registers: [registry],
});

export const keyResetsTotal = new Counter({
  name: 'quotafed_key_resets_total',
  help: 'Operator resets of the state a request is counted against (POST /admin/keys/reset), by rule and scope (region or federation).',
  labelNames: ['rule', 'scope'] as const,
  registers: [registry],
});

/** quotafed_near_limit_total's increments on the decision path, added to it as it is read (metric-tally.ts). */
export const nearLimitTally = createTally(['rule'] as const);

export const nearLimitTotal = new Counter({
  name: 'quotafed_near_limit_total',
  help: "Admitted decisions that left at most 20% of the rule limit (the remaining the headers report; in a federation the federation's quota, not this region's share), like envoy ratelimit near_limit.",
  labelNames: ['rule'] as const,
  registers: [registry],
  collect() {
    nearLimitTally.drainInto(this);
  },
});

export const redisCommandSeconds = new Histogram({
  name: 'quotafed_redis_command_duration_seconds',
  help: 'Latency of Redis round trips made by the limiter (decide, release, ping probes), including failures.',
  labelNames: ['command'] as const,
  buckets: FAST_BUCKETS,
  registers: [registry],
});

export const redisErrorsTotal = new Counter({
  name: 'quotafed_redis_errors_total',
  help: 'Failed Redis round trips on the limiter path, by command and kind (timeout|unavailable|error).',
  labelNames: ['command', 'kind'] as const,
  registers: [registry],
});

export const breakerState = new Gauge({
  name: 'quotafed_breaker_state',
  help: 'Circuit breaker state: 0 closed (Redis decides), 1 open (degraded, probing Redis).',
  labelNames: ['region'] as const,
  registers: [registry],
});

export const redisUp = new Gauge({
  name: 'quotafed_redis_up',
  help: "1 while the region's Redis answers (a readiness PING, a ready connection), 0 while it does not.",
  registers: [registry],
});

export const breakerTransitionsTotal = new Counter({
  name: 'quotafed_breaker_transitions_total',
  help: 'Circuit breaker transitions, by region and the state entered.',
  labelNames: ['region', 'to'] as const,
  registers: [registry],
});

export const degradedAdmissionsTotal = new Counter({
  name: 'quotafed_degraded_admissions_total',
  help: 'Requests admitted without Redis deciding, by mode (fail-open|local-fallback). Alert on its rate.',
  labelNames: ['mode'] as const,
  registers: [registry],
});

export const limiterOverheadSeconds = new Histogram({
  name: 'quotafed_limiter_overhead_seconds',
  help: 'Time the limiter adds to a request: from the start of the decision to its result, whatever decided.',
  buckets: FAST_BUCKETS,
  registers: [registry],
});

export const fallbackSettledTotal = new Counter({
  name: 'quotafed_fallback_settled_total',
  help: 'Local-fallback admissions written back to Redis (against the window they were admitted in) once it answered again.',
  registers: [registry],
});

export const localFallbackKeys = new Gauge({
  name: 'quotafed_local_fallback_keys',
  help: 'Keys held by the in-memory fallback limiter (bounded by its capacity).',
  registers: [registry],
});

export const localFallbackRefusalsTotal = new Counter({
  name: 'quotafed_local_fallback_refusals_total',
  help:
    'Requests the local fallback refused to keep its bound: in a window that began before this process started ' +
    '(started-mid-window), or with no room for another key (full).',
  labelNames: ['rule', 'reason'] as const,
  registers: [registry],
});

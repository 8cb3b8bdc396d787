// Types at the boundary of the decision engine, and how an outcome's reported count reads. The HTTP layer, the
// middleware, the benchmarks and the chaos lab all speak these.
import type { Algorithm, FailMode, Rule } from '../config/schema.ts';
import type { ReportedCost } from './cost-from-response.ts';

/**
 * Who is asking and for what. Built by the HTTP layer from the request (or from a /v1/check body).
 *
 * @example
 * ```ts
 * const request: RequestContext = { apiKey: 'api-key-42', ip: '203.0.113.9', method: 'GET', path: '/search', cost: 1 };
 * const decision = await engine.decide(request);
 * ```
 */
export interface RequestContext {
  apiKey?: string | undefined;
  /** The client IP as IP-keyed rules count it: an IPv6 address cut to its prefix (`2001:db8:1:2::/64`). */
  ip: string;
  /**
   * The client's full address (not prefix-keyed), which the allow and deny lists match by containment; `ip`
   * when absent.
   */
  address?: string | undefined;
  method: string;
  /** The request path (no query string). */
  path: string;
  /** Tokens/requests this request costs; 1 unless a caller says otherwise. */
  cost?: number;
  /** An Envoy rate limit descriptor (gRPC ShouldRateLimit): only rules with `match.envoy` decide it. */
  descriptor?: DescriptorRequest;
  /**
   * Answer what the decision would be and spend nothing: no count, token or lease, nothing gossiped, no wait for
   * a grant, nothing counted by the local fallback (`POST /v1/check` with `"consume": false`, `limiter.peek`).
   */
  peek?: boolean;
  /**
   * The caller's plan (src/engine/plans.ts), which picks the rule a plan-aware rule decides by; the resilient
   * engine fills it in. Absent: the config's plan of the key, without a transition.
   */
  plan?: PlanChoice | undefined;
}

/**
 * The plan a request is decided under (docs/plans.md): `plan` (undefined: none, the rules as written) and, while
 * the key's plan changes, the plan it changes from, when (epoch ms) and the time of the decision: a plan-aware rule
 * then decides under both until the longer of the two rules' periods plus maxClockSkewMs has passed.
 *
 * @example
 * ```ts
 * const request: RequestContext = { apiKey: 'k', ip: '192.0.2.1', method: 'GET', path: '/', plan: { plan: 'pro', previous: 'free', changedAt: 1767225600000, now: Date.now() } };
 * ```
 */
export interface PlanChoice {
  plan: string | undefined;
  previous?: string | undefined;
  changedAt?: number;
  now?: number;
}

/** One descriptor of an Envoy RateLimitRequest, with the request's domain. */
export interface DescriptorRequest {
  domain: string;
  entries: ReadonlyArray<{ key: string; value: string }>;
  /**
   * Envoy's per-descriptor override (RateLimitDescriptor.limit): the matched rules decide this descriptor with
   * this limit and window instead of their own (same algorithm, fail mode and shadow), on a counter of their own.
   */
  limit?: LimitOverride | undefined;
  /** Rules another descriptor of the same request replaces (`replaces`): they decide nothing for this one. */
  replaced?: ReadonlySet<string> | undefined;
}

/** A limit and window that replace a rule's for one descriptor (Envoy's RateLimitDescriptor.limit). */
export interface LimitOverride {
  requestsPerUnit: number;
  periodMs: number;
}

/** How a decision was reached. */
export type DecisionSource =
  | 'redis' // the atomic Lua call decided
  | 'cache' // the local over-limit cache answered a key known to be exhausted until its reset
  | 'lease' // admitted from this process's local lease (rules[].lease; docs/leases.md)
  | 'fail-open' // Redis unavailable, rule fails open: admitted and counted
  | 'fail-closed' // Redis unavailable, rule fails closed: rejected
  | 'local-fallback'; // breaker open, this instance's share of the limit enforced in memory

/**
 * One rule's verdict on one request: its limit, what is left, when it resets, and who decided (`source`).
 *
 * @example
 * ```ts
 * const decision = await engine.decide(request);
 * for (const outcome of decision.outcomes) {
 *   console.log(outcome.rule, outcome.allowed, `${outcome.remaining}/${outcome.limit}`, outcome.source);
 * }
 * ```
 */
export interface RuleOutcome {
  rule: string;
  algorithm: Algorithm;
  allowed: boolean;
  /** The configured limit (global across the federation). */
  limit: number;
  /**
   * What this region can still admit for this caller under this rule, after this request (its allowance or
   * tokens in a federation; the whole limit's remainder on one region). The over-limit cache and the waits go by it.
   */
  remaining: number;
  /**
   * The federation's remaining quota for this caller under this rule as this region's view has it, after this
   * request: what one exact global limiter would answer (up to sync lag), never below `remaining`. What the
   * headers report (quotaRemainingOf). Absent where only `remaining` is known (the local fallback, the
   * over-limit cache, fail modes, an engine of your own): then it is `remaining`.
   */
  quotaRemaining?: number;
  /** Epoch milliseconds at which the rule is fully available again (window end / bucket full). */
  resetAtMs: number;
  /** Milliseconds until a retry can succeed (0 when allowed). */
  retryAfterMs: number;
  /** Period of the rule in ms (for the RateLimit-Policy header). */
  periodMs: number;
  shadow: boolean;
  failMode: FailMode;
  source: DecisionSource;
  /** Denied by this region's share while its view showed federation headroom (redis source only; docs/federation.md §4). */
  falseDenial?: boolean;
}

/**
 * The count an outcome reports to clients: the federation's remaining quota, or `remaining` when that is all
 * the outcome knows.
 *
 * @example
 * ```ts
 * quotaRemainingOf({ ...outcome, remaining: 332, quotaRemaining: 999 }); // 999
 * ```
 */
export function quotaRemainingOf(outcome: Pick<RuleOutcome, 'remaining' | 'quotaRemaining'>): number {
  return outcome.quotaRemaining ?? outcome.remaining;
}

/**
 * The engine's answer for one request: allowed when every non-shadow rule allowed it; `binding` drives the headers.
 *
 * @example
 * ```ts
 * const decision = await engine.decide({ apiKey: 'api-key-42', ip: '', method: 'GET', path: '/search' });
 * if (!decision.allowed) return c.json({ error: 'rate limited', retryAfterMs: decision.binding?.retryAfterMs }, 429);
 * ```
 */
export interface Decision {
  /** True when every non-shadow rule allowed the request. */
  allowed: boolean;
  outcomes: RuleOutcome[];
  /** The most restrictive outcome: a denying rule if any, else the one with the least quota remaining. Drives headers. */
  binding: RuleOutcome | undefined;
  /** Concurrency leases taken by this request; release them when the request completes. */
  leases: Lease[];
  /** Set when an allow or deny list decided the request before any rule (then `outcomes` is empty). */
  list?: ListVerdict;
  /**
   * What an admission of rules with `countResponses` or `costFromResponse` needs to be refunded once the answer is known (the Redis
   * engine sets it only for such rules); see DecisionEngine.settleResponse.
   */
  refund?: RefundTicket;
}

/** An admission's parts per script call, as refund.lua takes them back. */
export interface RefundTicket {
  /**
   * Names this admission's refunds (refund.lua's marker per rule): settling the same ticket again, or a reported
   * cost sent twice to /v1/release, returns nothing more.
   */
  id: string;
  cost: number;
  leaseId: string;
  calls: { shard: number; now: number; rules: { rule: Rule; key: string }[] }[];
}

/**
 * Which list decided a request, and by what kind of entry (src/engine/access-lists.ts). `deny` answers 403 (Envoy:
 * OVER_LIMIT); `allow` skips every rule.
 *
 * @example
 * ```ts
 * const decision = await engine.decide(request);
 * if (decision.list?.list === 'deny') console.log(`denied by a ${decision.list.kind} entry (${decision.list.source})`);
 * ```
 */
export interface ListVerdict {
  list: 'allow' | 'deny';
  kind: 'apiKey' | 'ip';
  /** Where the entry came from: the config file, or the admin API (the region's Redis). */
  source: 'config' | 'admin';
}

/** A decision plus the route pattern it was counted under (the metrics label for 429s). */
export interface ObservedDecision extends Decision {
  endpoint: string;
}

/** A rule that applies to a request, with the state key and shard it decides against. */
export interface MatchedRule {
  rule: Rule;
  /** The Redis state key of this rule for this caller. */
  key: string;
  /** The API key, IP or other value that decides the cluster slot. */
  principal: string;
  /** The route pattern that matched (metrics label), when the rule names endpoints. */
  endpoint: string | undefined;
  /** The shard (cluster slot) of `key`: shardOf(principal). */
  shard: number;
}

/**
 * A concurrency slot held by a request until it is released (or its lease TTL runs out).
 *
 * @example
 * ```ts
 * const decision = await engine.decide(request);
 * try {
 *   await handle(request);
 * } finally {
 *   await engine.release(decision.leases);
 * }
 * ```
 */
export interface Lease {
  key: string;
  id: string;
  /** Slots held (the request's cost). */
  slots: number;
}

/**
 * What decides requests: the Redis engine, the resilient wrapper around it, or your own (tests, other stores).
 * The middleware and the regional service take any.
 *
 * @example
 * ```ts
 * const allowAll: DecisionEngine = {
 *   decide: async () => ({ allowed: true, outcomes: [], binding: undefined, leases: [] }),
 *   release: async () => {},
 *   close: async () => {},
 * };
 * app.use('/api/*', quotafed({ engine: allowAll }));
 * ```
 */
export interface DecisionEngine {
  decide(request: RequestContext): Promise<Decision>;
  release(leases: readonly Lease[]): Promise<void>;
  close(): Promise<void>;
  /**
   * The answer to an admitted request is known: refund what rules with `countResponses` do not count for its status
   * and what costFromResponse rules reserved beyond the cost the answer reports (`reported`: the cost header's
   * value; none or undefined keeps the whole reserve) (decision.refund). Resolves with the number of state keys
   * refunded; engines without such rules need not have it.
   */
  settleResponse?(decision: Decision, status: number, reported?: ReportedCost): Promise<number>;
}

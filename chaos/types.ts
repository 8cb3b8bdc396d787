// The chaos lab's shared vocabulary: scenarios, the decisions a run records, and what a run measures.
import type { LeakageBudget } from '../src/config/schema.ts';
import type { TrafficShape } from '../test/support/simulation/index.ts';

/** Display order; the federation indexes regions by sorted name, which the lab never needs to know. */
export const REGIONS = ['us-east', 'eu-west', 'ap-south'] as const;
export type RegionName = (typeof REGIONS)[number];

/** The two federated rules every run enforces: one per algorithm family, on its own endpoint. */
export type RuleKind = 'window' | 'bucket';
export const RULE_NAMES: Record<RuleKind, string> = { window: 'chaos-window', bucket: 'chaos-bucket' };
export const RULE_PATHS: Record<RuleKind, string> = { window: '/chaos/window', bucket: '/chaos/bucket' };

export interface Policy {
  /** fixedWindow: requests per window. */
  windowLimit: number;
  windowPeriodMs: number;
  /** tokenBucket: refill per period and capacity. */
  bucketLimit: number;
  bucketPeriodMs: number;
  bucketBurst: number;
  /** rules[].lease on both rules (docs/leases.md): each service admits a hot key from a local lease. */
  lease?: { size: number; ttlMs: number };
}

export const DEFAULT_POLICY: Policy = {
  windowLimit: 300,
  windowPeriodMs: 5_000,
  bucketLimit: 300,
  bucketPeriodMs: 5_000,
  bucketBurst: 300,
};

export interface TrafficSpec {
  /** Requests per second over both rules and all regions. */
  ratePerSec: number;
  shape: TrafficShape;
  /** Share of requests on the window rule (the rest go to the bucket rule). */
  windowShare: number;
  /** One hot key among many cold ones; absent = every request on one key per rule. */
  hotKey?: { hotShare: number; coldKeys: number };
  /** A fixed request pattern on the one key instead of Poisson arrivals (`ratePerSec`, `shape` unused). */
  pattern?: TrafficPattern;
}

export type TrafficPattern =
  /**
   * Per rule, `requests` to one region spread evenly over `spreadMs` (0: all at once, as fast as the load
   * generator's slots allow); the bucket rule's burst starts `ruleGapMs` after the window rule's.
   */
  | { kind: 'burst'; region: RegionName; requests: number; spreadMs: number; ruleGapMs: number }
  /**
   * One request at a time (each sent when the previous one answered): `perRegion` per rule to each region in
   * turn, the rules alternating, with `pauseMs` between regions (after the last answer of one region). With
   * `inFlight`, each region's requests go out `inFlight` at a time (each slot sends its next when its last answered).
   */
  | { kind: 'sequential'; regions: readonly RegionName[]; perRegion: number; pauseMs: number; inFlight?: number };

/** Closed-loop load on random keys from a separate process (`chaos/flood.ts`), for the whole run. */
export interface FloodSpec {
  /** Connections over all regions (each sends its next request when the previous one answered). */
  connections: number;
}

/**
 * A fault lasts from `at` to `until` (ms after the traffic starts); `until` is the heal. A removed region has no
 * heal: the change is over once the remaining regions run the new peer list.
 */
export type ChaosFault =
  | { kind: 'latency'; at: number; until: number; latencyMs: number; jitterMs: number }
  /** Every link to and from the region is cut. */
  | { kind: 'partition'; at: number; until: number; region: RegionName }
  /** Only the region's outgoing links are cut: it still hears its peers, they no longer hear it. */
  | { kind: 'oneWay'; at: number; until: number; region: RegionName }
  /** Both directions of one link go down and up every `everyMs`. */
  | { kind: 'flap'; at: number; until: number; from: RegionName; to: RegionName; everyMs: number }
  /** The region's redis-server is SIGKILLed (no persistence: its data is lost) and restarted at `until`. */
  | { kind: 'redisDown'; at: number; until: number; region: RegionName }
  /** The region's service process (HTTP and gossip workers) is SIGKILLed and started again at `until`. */
  | { kind: 'serviceDown'; at: number; until: number; region: RegionName }
  /** The region's redis-server is SIGSTOPped (it hangs, data kept) and SIGCONTed at `until`. */
  | { kind: 'redisStall'; at: number; until: number; region: RegionName }
  /**
   * An RDB snapshot of the region's Redis (BGSAVE) at `snapshotAt`; it keeps admitting, is SIGKILLed at `at` and
   * restarted at `until` on the same port from that snapshot: the admissions after it are lost, the start-up
   * marker survives, and only the new run_id tells (docs/federation.md §4b).
   */
  | { kind: 'redisSnapshotRestart'; snapshotAt: number; at: number; until: number; region: RegionName }
  /**
   * The region's config file is rewritten with `policy` (the run's policy otherwise unchanged) and reloaded
   * (POST /admin/policy/reload) at `at`; at `until` the run's policy is written and reloaded back. The other regions
   * keep the run's policy: a rule reloaded one region at a time.
   */
  | { kind: 'ruleReload'; at: number; until: number; region: RegionName; policy: Policy }
  /**
   * The region leaves the federation for good, as docs/operations.md §6a orders it: at `at` its service is stopped
   * (and never started again, its traffic going to the others), then every remaining region's config is rewritten
   * with the peer list without it and its service restarted, one region after the other; each fences its current
   * windows at start-up (topology fingerprint changed).
   */
  | { kind: 'regionRemoved'; at: number; region: RegionName };

export interface ScenarioSpec {
  name: string;
  description: string;
  durationMs: number;
  syncIntervalMs: number;
  leakageBudget: LeakageBudget;
  traffic: TrafficSpec;
  /** Latency on every cross-region link for the whole run (on top of faults). */
  linkLatency?: { latencyMs: number; jitterMs: number };
  faults: ChaosFault[];
  /** Product defaults on Redis loss (fail open + local fallback): outside the guarantee, reported only. */
  failOpen?: boolean;
  /**
   * The product's Redis client and breaker settings (50 ms command timeout, local fallback on) instead of the
   * lab's 1 s timeout without fallback; the rules stay fail closed, so the run is judged against the bound.
   */
  productRedisDefaults?: boolean;
  /** Decisions without Redis are what the run measures: it is not declared INVALID for them. */
  degradedExpected?: boolean;
  /** This run's policy instead of the runner's (e.g. minute-long windows, the Redis-trouble probe rule). */
  policy?: Policy;
  /** rules[].maxWaitMs on both rules: false denials wait this long for a grant (0 or absent: never). */
  maxWaitMs?: number;
  /** Start the traffic at a window boundary when the current window has less than `durationMs` left. */
  alignToWindow?: boolean;
  /** Background load on random keys for the whole run. */
  flood?: FloodSpec;
  /** Also run Upstash's MultiRegionRatelimit on the same traffic. */
  peer: boolean;
  /** Sweep bookkeeping: which axis this run belongs to. */
  sweep?: { axis: 'syncInterval' | 'latency'; x: number };
}

/** One decision, as the load generator saw it. */
export interface Decision {
  /** Milliseconds since the run's start: midpoint of request and answer. */
  t: number;
  region: RegionName;
  key: string;
  rule: RuleKind;
  /** admitted | limited (429) | error (no answer, 5xx, connection refused: not admitted) */
  outcome: 'admitted' | 'limited' | 'error';
  /** Window id by the deciding Redis's clock (window rule), else by `t`. */
  window: number;
  /** Where the decision came from (redis, fail-open, local-fallback…), when the service said. */
  source?: string;
  /** HTTP status of an error (0: no answer, connection refused or timed out). */
  status?: number;
}

export interface LeakageResult {
  /** Largest excess over the policy for one key: a window (window rule) or an interval (bucket rule). */
  max: number;
  /** `max` as % of the limit. */
  percent: number;
  /** Sum of per-window excess (window rule); the same as max for the bucket. */
  total: number;
  /** Where the largest excess happened. */
  worst: { key: string; window?: number; fromMs?: number; toMs?: number } | null;
}

export interface UnderAdmission {
  /** Requests the exact global limiter admitted that the federation refused. */
  refused: number;
  /** Admissions the exact limiter made. */
  exactAdmitted: number;
  /** `refused` as % of `exactAdmitted`. */
  percent: number;
}

export interface LimiterResult {
  requests: number;
  admitted: number;
  limited: number;
  errors: number;
  /** 429s as % of answered requests. */
  rate429: number;
  leakage: Record<RuleKind, LeakageResult | null>;
  underAdmission: Record<RuleKind, UnderAdmission | null>;
}

export interface RunResult {
  scenario: ScenarioSpec;
  seed: number;
  startedAt: string;
  wallMs: number;
  /** Budget in requests per rule (null = unbounded). */
  budget: Record<RuleKind, number | null>;
  limits: Record<RuleKind, number>;
  policy: Policy;
  quotafed: LimiterResult;
  peer: LimiterResult | null;
  /** After each heal: ms until every region's view holds what each region had admitted at the heal. */
  convergenceMs: Array<{ fault: string; healedAt: number; ms: number | null }>;
  syncLagMs: { p50: number | null; p99: number | null; samples: number; metric: string | null };
  /** Window-rule admissions per region per time bin (for the chart). */
  timeline: { binMs: number; bins: Record<RegionName, number[]>; peerBins?: Record<RegionName, number[]> };
  /** How late the load generator sent requests against the plan (ms): large values mean a starved machine. */
  lateness: { p50: number; p99: number; max: number };
  /**
   * False when a region that no fault touched decided most requests without Redis (breaker open: a broken
   * build, a starved machine): such a run measured the fail mode, not the federation.
   */
  valid: boolean;
  /** Within budget on every rule (always true for unbounded budgets; failOpen runs are not judged). */
  withinBudget: boolean;
  notes: string[];
}

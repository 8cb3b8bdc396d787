// The named scenarios and the sweeps. Every one is plain data: the runner, the CI suite and the report read
// the same definitions, and a seed fixes the traffic.
import type { LeakageBudget } from '../src/config/schema.ts';
import { DEFAULT_POLICY, type ChaosFault, type Policy, type ScenarioSpec, type TrafficPattern, type TrafficSpec } from './types.ts';

export interface CatalogueOptions {
  /** Shorter runs (CI, smoke checks). */
  quick?: boolean;
  /** Run Upstash's limiter next to quotafed. */
  peer?: boolean;
}

/**
 * 80 requests/s per rule on one key against 60/s allowed (300 per 5 s): every limiter is under pressure all the
 * time, while the whole lab (three services, three Redis, Toxiproxy, the load generator, the peer) fits on two
 * cores shared with other work.
 */
const TRAFFIC: TrafficSpec = { ratePerSec: 160, shape: { kind: 'even' }, windowShare: 0.5 };

/**
 * The healthy-accuracy cases on minute-long windows and buckets (as the seed's 1,000/min rule), so a
 * whole case sits in one window or epoch: 300 per minute, capacity 300, budget 5% (15).
 */
export const MINUTE_POLICY: Policy = {
  windowLimit: 300,
  windowPeriodMs: 60_000,
  bucketLimit: 300,
  bucketPeriodMs: 60_000,
  bucketBurst: 300,
};

/** The Redis-trouble probe rule: 100 per 30 s (fail closed in the lab), budget 5%: at most 105 per window for a key. */
export const PROBE_POLICY: Policy = {
  windowLimit: 100,
  windowPeriodMs: 30_000,
  bucketLimit: 100,
  bucketPeriodMs: 30_000,
  bucketBurst: 100,
};

/** A fresh key's burst (1.1 × the limit per rule) into us-east. */
const BURST_REQUESTS = Math.round(1.1 * MINUTE_POLICY.windowLimit);

/**
 * Issue 20's sequential case with requests in flight: 0.4 L per rule into each region in turn, 24 at a time, 1.5 s
 * between regions, two rounds.
 */
const SEQUENTIAL_IN_FLIGHT: TrafficPattern = {
  kind: 'sequential',
  regions: ['us-east', 'eu-west', 'ap-south', 'us-east', 'eu-west', 'ap-south'],
  perRegion: Math.round(0.4 * MINUTE_POLICY.windowLimit),
  pauseMs: 1_500,
  inFlight: 24,
};

function burst(spreadMs: number, ruleGapMs: number): TrafficPattern {
  return { kind: 'burst', region: 'us-east', requests: BURST_REQUESTS, spreadMs, ruleGapMs };
}

function scale(ms: number, quick: boolean): number {
  // Rounded to 100 ms so fault times read well in the report.
  return quick ? Math.round((ms * 2) / 300) * 100 : ms;
}

export function scenarios(options: CatalogueOptions = {}): ScenarioSpec[] {
  const quick = options.quick ?? false;
  const peer = options.peer ?? true;
  const duration = scale(12_000, quick);
  const s = (ms: number) => scale(ms, quick);
  const base = {
    durationMs: duration,
    syncIntervalMs: 100,
    leakageBudget: '5%' as LeakageBudget,
    traffic: TRAFFIC,
    faults: [] as ChaosFault[],
    peer,
  };
  return [
    { ...base, name: 'baseline', description: 'healthy links, traffic spread evenly over the three regions' },
    {
      ...base,
      name: 'one-region',
      description: 'every request arrives in us-east (the accuracy case: one region should get nearly the whole limit)',
      traffic: { ...TRAFFIC, shape: { kind: 'region', region: 'us-east' } },
    },
    {
      ...base,
      name: 'shifting',
      description: 'all traffic in one region at a time, moving every 2 s',
      traffic: { ...TRAFFIC, shape: { kind: 'shifting', everyMs: 2_000 } },
    },
    {
      ...base,
      name: 'hot-key',
      description: 'one hot key (70% of requests) among 50 cold ones, even regions',
      traffic: { ...TRAFFIC, ratePerSec: 200, hotKey: { hotShare: 0.7, coldKeys: 50 } },
    },
    {
      ...base,
      name: 'hot-key-leased',
      description: 'hot-key with local leases (rules[].lease 10 units / 100 ms): each service admits the hot key from memory',
      traffic: { ...TRAFFIC, ratePerSec: 200, hotKey: { hotShare: 0.7, coldKeys: 50 } },
      policy: { ...DEFAULT_POLICY, lease: { size: 10, ttlMs: 100 } },
    },
    {
      ...base,
      name: 'one-region-leased',
      description: 'one-region with local leases (rules[].lease 10 units / 100 ms)',
      traffic: { ...TRAFFIC, shape: { kind: 'region', region: 'us-east' } },
      policy: { ...DEFAULT_POLICY, lease: { size: 10, ttlMs: 100 } },
    },
    {
      ...base,
      name: 'latency-50',
      description: '50 ± 10 ms one-way latency on every link for the whole run',
      linkLatency: { latencyMs: 50, jitterMs: 10 },
    },
    {
      ...base,
      name: 'latency-200',
      description: '200 ± 40 ms one-way latency on every link',
      linkLatency: { latencyMs: 200, jitterMs: 40 },
    },
    {
      ...base,
      name: 'latency-1000',
      description: '1000 ± 200 ms one-way latency on every link',
      linkLatency: { latencyMs: 1_000, jitterMs: 200 },
    },
    {
      ...base,
      name: 'partition',
      description: 'ap-south cut off from both peers for 6 s, then healed; traffic shifts between regions',
      traffic: { ...TRAFFIC, shape: { kind: 'shifting', everyMs: 1_500 } },
      faults: [{ kind: 'partition', region: 'ap-south', at: s(3_000), until: s(9_000) }],
    },
    {
      ...base,
      name: 'one-way',
      description: 'eu-west can no longer reach its peers (they still reach it) for 6 s',
      faults: [{ kind: 'oneWay', region: 'eu-west', at: s(3_000), until: s(9_000) }],
    },
    {
      ...base,
      name: 'flapping',
      description: 'the us-east ↔ ap-south link goes down and up every 500 ms for 8 s',
      faults: [{ kind: 'flap', from: 'us-east', to: 'ap-south', everyMs: 500, at: s(2_000), until: s(10_000) }],
    },
    {
      ...base,
      name: 'redis-kill',
      description: "eu-west's redis-server is SIGKILLed (its data is lost) and restarted 2 s later",
      faults: [{ kind: 'redisDown', region: 'eu-west', at: s(4_000), until: s(6_000) }],
    },
    {
      ...base,
      name: 'redis-snapshot-restart',
      description:
        "eu-west's Redis takes an RDB snapshot (BGSAVE) at 1 s, keeps admitting, is SIGKILLed at 6 s and restarted from the " +
        'snapshot at 7 s (marker kept, admissions lost: only its new run_id tells), all in one 30 s window; 100-per-30 s ' +
        'fail-closed rules, 30 requests/s, 60% in eu-west',
      // Snapshot, kill and restart inside one window, with most of it left: the restored state under-counts that
      // window's admissions (eu-west has spent its share by ~4 s), so without a fence eu-west would admit its
      // share again (≈ 33 > B = 5). 30 s windows keep the three in one window even when a busy machine delays the
      // fault driver by seconds; light traffic keeps the runner from being that machine.
      durationMs: s(20_000),
      policy: PROBE_POLICY,
      alignToWindow: true,
      traffic: { ...TRAFFIC, ratePerSec: 30, shape: { kind: 'weighted', weights: [0.2, 0.6, 0.2] } },
      faults: [{ kind: 'redisSnapshotRestart', region: 'eu-west', snapshotAt: 1_000, at: 6_000, until: 7_000 }],
    },
    {
      ...base,
      name: 'rule-reload-mid-window',
      description:
        'us-east alone reloads both rules from 300 to 400 per 5 s (bucket capacity 400) 2.5 s into a window, through POST ' +
        '/admin/policy/reload, and back 5 s later; the regions decide at the tighter terms while they disagree, so the run is ' +
        'judged against the tighter limit (300) + B',
      // Starts on a window boundary, so the reload lands mid-window and the window after it runs wholly under the
      // mixed configs.
      alignToWindow: true,
      policy: DEFAULT_POLICY,
      faults: [
        {
          kind: 'ruleReload',
          region: 'us-east',
          at: 2_500,
          until: 7_500,
          policy: { ...DEFAULT_POLICY, windowLimit: 400, bucketLimit: 400, bucketBurst: 400 },
        },
      ],
    },
    {
      ...base,
      name: 'region-removed',
      description:
        'ap-south leaves the federation 2.5 s into a window (docs/operations.md §6a): its service is stopped for good and its ' +
        'traffic goes to the other two, then us-east and eu-west are restarted one after the other on the two-region peer ' +
        'list and fence their current windows; judged against L + B per window, 25 s so that full windows follow the change',
      // Starts on a window boundary, so the removal lands mid-window. Each restart takes a few seconds on a busy
      // machine (a new tsx process): the change is over about 10 s in, and the 25 s leave two or more whole windows
      // under the two-region peer list to show that the removed region's share went to the others.
      durationMs: 25_000,
      alignToWindow: true,
      policy: DEFAULT_POLICY,
      faults: [{ kind: 'regionRemoved', region: 'ap-south', at: 2_500 }],
    },
    {
      ...base,
      name: 'service-kill',
      description: "us-east's service process (HTTP and gossip workers) is SIGKILLed and started again",
      faults: [{ kind: 'serviceDown', region: 'us-east', at: s(3_000), until: s(4_000) }],
    },
    // Accuracy of a healthy federation on a fresh key, against an exact global limiter.
    {
      ...base,
      name: 'burst-1s',
      description:
        `a fresh key: ${BURST_REQUESTS} requests per rule into us-east spread over 1 s (the bucket rule's 2.5 s later), ` +
        `300/min rules, healthy links`,
      durationMs: 4_000,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      traffic: { ...TRAFFIC, pattern: burst(1_000, 2_500) },
    },
    {
      ...base,
      name: 'burst-250ms',
      description: `as burst-1s, the ${BURST_REQUESTS} requests per rule spread over 250 ms`,
      durationMs: 2_500,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      traffic: { ...TRAFFIC, pattern: burst(250, 1_500) },
    },
    {
      ...base,
      name: 'sequential',
      description:
        'one key, one request at a time: 120 per rule to us-east, 1.5 s pause, 120 to eu-west, pause, 120 to ap-south (the ' +
        'sequential case of 400/400/400 of 1,000, scaled), 300/min rules',
      durationMs: 10_000,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      traffic: { ...TRAFFIC, pattern: { kind: 'sequential', regions: ['us-east', 'eu-west', 'ap-south'], perRegion: 120, pauseMs: 1_500 } },
    },
    {
      ...base,
      name: 'sequential-in-flight',
      description:
        'one key, 24 requests in flight: 120 per rule (0.4 L) to us-east, 1.5 s pause, 120 to eu-west, pause, 120 to ap-south, ' +
        'two rounds (issue 20: each burst is over in about one round trip), 300/min rules',
      durationMs: 12_000,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      traffic: { ...TRAFFIC, pattern: SEQUENTIAL_IN_FLIGHT },
    },
    {
      ...base,
      name: 'sequential-in-flight-wait',
      description: 'as sequential-in-flight, with rules[].maxWaitMs 250 on both rules',
      durationMs: 12_000,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      maxWaitMs: 250,
      traffic: { ...TRAFFIC, pattern: SEQUENTIAL_IN_FLIGHT },
    },
    {
      ...base,
      name: 'instant-burst',
      description:
        `a never-seen key: ${BURST_REQUESTS} requests per rule into us-east at once (64 in flight), 300/min rules; a scheme ` +
        `that does not wait admits at least (L + B)/N = 105`,
      durationMs: 2_500,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      traffic: { ...TRAFFIC, pattern: burst(0, 1_500) },
    },
    {
      ...base,
      name: 'instant-burst-wait',
      description:
        `as instant-burst, with rules[].maxWaitMs 250 on both rules: requests beyond us-east's share wait (at most ` +
        `250 ms) for the idle regions' grant instead of a 429`,
      durationMs: 2_500,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      maxWaitMs: 250,
      traffic: { ...TRAFFIC, pattern: burst(0, 1_500) },
    },
    {
      ...base,
      name: 'burst-250ms-wait',
      description: 'as burst-250ms, with rules[].maxWaitMs 250 on both rules',
      durationMs: 2_500,
      policy: MINUTE_POLICY,
      alignToWindow: true,
      peer: false,
      maxWaitMs: 250,
      traffic: { ...TRAFFIC, pattern: burst(250, 1_500) },
    },
    // The bound through Redis trouble, with the product's Redis timeouts and breaker (local fallback on).
    {
      ...base,
      name: 'redis-stall',
      description:
        "eu-west's redis-server SIGSTOPped for 8 s under light traffic (20 requests/s), fail-closed 100-per-30 s rules, the " +
        "product's Redis timeouts and breaker",
      durationMs: s(20_000),
      policy: PROBE_POLICY,
      productRedisDefaults: true,
      peer: false,
      traffic: { ...TRAFFIC, ratePerSec: 20 },
      faults: [{ kind: 'redisStall', region: 'eu-west', at: s(4_000), until: s(12_000) }],
    },
    {
      ...base,
      name: 'cpu-load',
      description:
        'no fault: random-key load on /v1/check from 32 connections saturates the host while one key sends 15 requests/s per fail-closed ' +
        "100-per-30 s rule, the product's Redis timeouts and breaker",
      durationMs: s(20_000),
      policy: PROBE_POLICY,
      productRedisDefaults: true,
      degradedExpected: true,
      peer: false,
      traffic: { ...TRAFFIC, ratePerSec: 30 },
      flood: { connections: 32 },
    },
    {
      ...base,
      name: 'redis-kill-fail-open',
      description: 'as redis-kill, with the product defaults on Redis loss (fail open, local fallback): outside the guarantee',
      failOpen: true,
      faults: [{ kind: 'redisDown', region: 'eu-west', at: s(4_000), until: s(6_000) }],
    },
  ];
}

export const SWEEP_INTERVALS_MS = [50, 100, 250, 1_000, 5_000] as const;
export const SWEEP_LATENCIES_MS = [0, 50, 200, 1_000] as const;
export const SWEEP_BUDGETS: readonly LeakageBudget[] = [0, '1%', '5%', 'unbounded'];

export function budgetLabel(budget: LeakageBudget): string {
  return typeof budget === 'number' ? String(budget) : budget;
}

/** Leakage and under-admission against sync interval and link latency, at each budget. */
export function sweep(options: CatalogueOptions = {}): ScenarioSpec[] {
  const quick = options.quick ?? false;
  const durationMs = quick ? 6_000 : 8_000;
  // Uneven but concurrent demand: plain gossip leaks (regions admit at once, each blind to the others' last
  // interval), and a budgeted federation has to move allowance to the busy region (its price).
  const traffic: TrafficSpec = { ...TRAFFIC, shape: { kind: 'weighted', weights: [0.6, 0.3, 0.1] } };
  const runs: ScenarioSpec[] = [];
  for (const leakageBudget of SWEEP_BUDGETS) {
    for (const interval of SWEEP_INTERVALS_MS) {
      runs.push({
        name: `sweep-sync-${interval}ms-budget-${budgetLabel(leakageBudget)}`,
        description: `sync interval ${interval} ms, budget ${budgetLabel(leakageBudget)}, 50 ± 10 ms links`,
        durationMs,
        syncIntervalMs: interval,
        leakageBudget,
        traffic,
        linkLatency: { latencyMs: 50, jitterMs: 10 },
        faults: [],
        peer: false,
        sweep: { axis: 'syncInterval', x: interval },
      });
    }
    for (const latency of SWEEP_LATENCIES_MS) {
      runs.push({
        name: `sweep-latency-${latency}ms-budget-${budgetLabel(leakageBudget)}`,
        description: `link latency ${latency} ms, sync interval 100 ms, budget ${budgetLabel(leakageBudget)}`,
        durationMs,
        syncIntervalMs: 100,
        leakageBudget,
        traffic,
        ...(latency > 0 ? { linkLatency: { latencyMs: latency, jitterMs: Math.round(latency / 5) } } : {}),
        faults: [],
        peer: false,
        sweep: { axis: 'latency', x: latency },
      });
    }
  }
  return runs;
}

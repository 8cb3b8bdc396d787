// The named scenarios and the sweeps. Every one is plain data: the runner, the CI suite and the report read
// the same definitions, and a seed fixes the traffic.
import type { LeakageBudget } from '../src/config/schema.ts';
import type { ChaosFault, ScenarioSpec, TrafficSpec } from './types.ts';

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

function scale(ms: number, quick: boolean): number {
  // Rounded to 100 ms so fault times read well in the report.
  return quick ? Math.round((ms * 2) / 300) * 100 : ms;
}

export function scenarios(options: CatalogueOptions = {}): ScenarioSpec[] {
  const quick = options.quick ?? false;
  const peer = options.peer ?? true;
  const duration = scale(12_000, quick);
  const s = (ms: number) => scale(ms, quick);
  const base = { durationMs: duration, syncIntervalMs: 100, leakageBudget: '5%' as LeakageBudget, traffic: TRAFFIC, faults: [] as ChaosFault[], peer };
  return [
    { ...base, name: 'baseline', description: 'healthy links, traffic spread evenly over the three regions' },
    { ...base, name: 'one-region', description: 'every request arrives in us-east (the accuracy case: one region should get nearly the whole limit)', traffic: { ...TRAFFIC, shape: { kind: 'region', region: 'us-east' } } },
    { ...base, name: 'shifting', description: 'all traffic in one region at a time, moving every 2 s', traffic: { ...TRAFFIC, shape: { kind: 'shifting', everyMs: 2_000 } } },
    { ...base, name: 'hot-key', description: 'one hot key (70% of requests) among 50 cold ones, even regions', traffic: { ...TRAFFIC, ratePerSec: 200, hotKey: { hotShare: 0.7, coldKeys: 50 } } },
    { ...base, name: 'latency-50', description: '50 ± 10 ms one-way latency on every link for the whole run', linkLatency: { latencyMs: 50, jitterMs: 10 } },
    { ...base, name: 'latency-200', description: '200 ± 40 ms one-way latency on every link', linkLatency: { latencyMs: 200, jitterMs: 40 } },
    { ...base, name: 'latency-1000', description: '1000 ± 200 ms one-way latency on every link', linkLatency: { latencyMs: 1_000, jitterMs: 200 } },
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
      name: 'service-kill',
      description: "us-east's service process (HTTP and gossip workers) is SIGKILLed and started again",
      faults: [{ kind: 'serviceDown', region: 'us-east', at: s(3_000), until: s(4_000) }],
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

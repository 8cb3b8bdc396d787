// Measurements: the stats record, sync lag, convergence probes, the per-event audit and the exact-limiter tally.
import {
  SHARE_UNITS,
  decideBucket,
  decideWindow,
  epochCells,
  federationParams,
  shareAt,
  windowAllowance,
  windowCells,
  windowForfeited,
  windowIdAt,
  type BucketState,
  type WindowState,
} from '../../../src/protocol/index.ts';
import { localTime, newBucketSlots, newWindow, ownCount, slotsOf } from './state.ts';
import type { KeyState, RegionSim, Scenario, SimDecision, SimStats, Slots, WindowTally } from './types.ts';

export function emptyStats(): SimStats {
  return {
    requests: 0,
    admitted: 0,
    unserved: 0,
    exactAdmitted: 0,
    messagesSent: 0,
    messagesApplied: 0,
    sendFailures: 0,
    messagesLost: 0,
    windows: [],
    maxWindowOverage: 0,
    syncLagMs: [],
    convergence: [],
    maxShareSum: 0,
    invariantViolations: [],
    fastSends: 0,
    falseDenials: 0,
    timeToGrantMs: [],
  };
}

/** SimStats.syncLagMs: from an admission in one region until each peer's view includes it. */
export class SyncLag {
  private readonly watch = new Map<string, { origin: number; window: number; value: number; since: number }[]>();

  /** `origin` admitted `key` at `now`, its own count in `window` now `value`: the regions it was sent to (`to`) must see it. */
  admitted(to: readonly number[], origin: number, key: string, window: number, value: number, now: number): void {
    for (const peer of to) {
      if (peer === origin) continue;
      const watchKey = `${peer}|${key}`;
      let list = this.watch.get(watchKey);
      if (!list) this.watch.set(watchKey, (list = []));
      list.push({ origin, window, value, since: now });
    }
  }

  /** The region's view of `key` changed (its slots: `view()`): record every admission it now includes. */
  resolve(region: RegionSim, key: string, view: () => Slots, now: number, stats: SimStats): void {
    const list = this.watch.get(`${region.index}|${key}`);
    if (!list || list.length === 0) return;
    const slots = view();
    const keep = [];
    for (const watch of list) {
      if (ownCount(slots, watch.window, watch.origin) >= watch.value) stats.syncLagMs.push(now - watch.since);
      else keep.push(watch);
    }
    this.watch.set(`${region.index}|${key}`, keep);
  }
}

type ProbeTruth = { origin: number; key: string; window: number; c: number; x: number[] }[];

/** SimStats.convergence: snapshots of every region's own rows, and when all views include them. */
export class Probes {
  private readonly probes: { probe: number; truth: ProbeTruth; convergedAt: number | null }[] = [];

  constructor(
    private readonly periodMs: number,
    private readonly windowed: boolean,
  ) {}

  take(probe: number, regions: RegionSim[], now: number): void {
    const truth: ProbeTruth = [];
    for (const region of regions) {
      for (const [key, state] of region.keys) {
        for (const slot of slotsOf(this.windowed, state)) {
          truth.push({ origin: region.index, key, window: slot.id, c: slot.c[region.index]!, x: [...slot.x[region.index]!] });
        }
      }
    }
    this.probes[probe] = { probe: now, truth, convergedAt: null };
    this.check(regions, now);
  }

  /** A probe has converged once every region's view holds every region's own rows as they were at the probe. */
  check(regions: RegionSim[], now: number): void {
    for (const probe of this.probes) {
      if (!probe || probe.convergedAt !== null) continue;
      const done = probe.truth.every((row) =>
        regions.every((region) => {
          if (region.index === row.origin) return true;
          const state = region.keys.get(row.key);
          const current = windowIdAt(localTime(now, region), this.periodMs);
          if (row.window < current - 1) return true; // that window is gone everywhere that matters
          if (!state) return false;
          const cells = this.windowed
            ? windowCells(state as WindowState, row.window)
            : epochCells((state as BucketState).slots, row.window);
          return cells.c[row.origin]! >= row.c && row.x.every((value, d) => cells.x[row.origin]![d]! >= value);
        }),
      );
      if (done) probe.convergedAt = now;
    }
  }

  results(): SimStats['convergence'] {
    return this.probes.filter(Boolean).map(({ probe, convergedAt }) => ({ probe, convergedAt }));
  }
}

/** Checks the per-region invariants (windows) or the global share sum (buckets) at true time `now`. */
export function audit(scenario: Scenario, regions: RegionSim[], windowed: boolean, now: number, stats: SimStats): void {
  const keys = new Set(scenario.traffic.map((stream) => stream.key));
  for (const key of keys) {
    if (windowed) {
      for (const region of regions) {
        const state = region.keys.get(key) as WindowState | undefined;
        if (!state || region.params.budget === null) continue;
        for (const slot of state.slots) {
          if (slot.id < 0 || windowForfeited(region.params, region.fence, slot.id)) continue;
          const allowance = windowAllowance(region.params, slot, region.index);
          if (slot.c[region.index]! > allowance) {
            stats.invariantViolations.push(`t=${now} ${region.name} ${key} w${slot.id}: c=${slot.c[region.index]} > l=${allowance}`);
          }
        }
      }
    } else {
      let total = 0;
      for (const region of regions) {
        if (region.wiped) continue; // holds nothing until it restarts behind a fence
        const state = region.keys.get(key) as BucketState | undefined;
        const slots = state?.slots ?? newBucketSlots(region.params.regions);
        const share = shareAt(region.params, slots, region.fence, localTime(now, region));
        if (share < 0) stats.invariantViolations.push(`t=${now} ${region.name} ${key}: σ=${share} < 0`);
        total += share;
      }
      stats.maxShareSum = Math.max(stats.maxShareSum, total);
      if (total > SHARE_UNITS && regions[0]!.params.budget !== null) {
        stats.invariantViolations.push(`t=${now} ${key}: Σσ=${total} > ${SHARE_UNITS}`);
      }
    }
  }
}

/**
 * Per key and window: the federation's admissions, demand, and what one exact global limiter admits over the
 * merged trace (by true time). Fills stats.windows, exactAdmitted and maxWindowOverage.
 */
export function tallyWindows(
  scenario: Scenario,
  sliding: boolean,
  arrivals: { t: number; key: string; cost: number }[],
  decisions: SimDecision[],
  stats: SimStats,
): void {
  const windowed = scenario.rule.algorithm !== 'tokenBucket';
  const exact = federationParams({
    regions: 1,
    self: 0,
    weights: [1],
    limit: scenario.rule.limit,
    periodMs: scenario.rule.periodMs,
    burst: scenario.rule.burst,
    leakageBudget: 0,
    maxClockSkewMs: 0,
  });
  const exactState = new Map<string, KeyState | undefined>();
  const tallies = new Map<string, WindowTally>();
  const tally = (key: string, window: number): WindowTally => {
    const id = `${key}|${window}`;
    let entry = tallies.get(id);
    if (!entry) tallies.set(id, (entry = { key, window, admitted: 0, exactAdmitted: 0, demand: 0 }));
    return entry;
  };
  for (const arrival of arrivals) {
    const window = windowIdAt(arrival.t, scenario.rule.periodMs);
    const entry = tally(arrival.key, window);
    entry.demand += arrival.cost;
    const held = exactState.get(arrival.key);
    if (windowed) {
      const decision = decideWindow(exact, (held as WindowState | undefined) ?? newWindow(exact), 0, arrival.t, arrival.cost, sliding);
      exactState.set(arrival.key, decision.state);
      if (decision.allowed) entry.exactAdmitted += arrival.cost;
    } else {
      const decision = decideBucket(exact, held as BucketState | undefined, 0, arrival.t, arrival.cost);
      exactState.set(arrival.key, decision.state);
      if (decision.allowed) entry.exactAdmitted += arrival.cost;
    }
  }
  for (const decision of decisions) if (decision.allowed) tally(decision.key, decision.window).admitted += decision.cost;
  stats.windows = [...tallies.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.window - b.window));
  stats.exactAdmitted = stats.windows.reduce((total, entry) => total + entry.exactAdmitted, 0);
  if (windowed) {
    stats.maxWindowOverage = Math.max(0, ...stats.windows.map((entry) => entry.admitted - scenario.rule.limit));
  }
}

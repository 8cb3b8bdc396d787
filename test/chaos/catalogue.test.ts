// The issue-21 scenarios as data: the reload scenario is judged against the larger of its old and new limits, the
// snapshot restart's three steps sit in one window of its rule (else the restored state loses nothing current), and
// the removed region gets no traffic after its removal while the plan before it stays the same.
import { describe, expect, it } from 'vitest';
import { boundPolicy } from '../../chaos/experiment.ts';
import { scenarios } from '../../chaos/scenarios.ts';
import { planTraffic, removalsOf } from '../../chaos/traffic.ts';
import { DEFAULT_POLICY, type RegionName, type ScenarioSpec } from '../../chaos/types.ts';

function named(name: string, quick: boolean): ScenarioSpec {
  const spec = scenarios({ quick, peer: false }).find((s) => s.name === name);
  if (!spec) throw new Error(`no scenario ${name}`);
  return spec;
}

describe('chaos catalogue: issue-21 scenarios', () => {
  it('boundPolicy takes the smaller of the run policy and each reload (the tighter terms), periods unchanged', () => {
    expect(boundPolicy(DEFAULT_POLICY, [])).toBe(DEFAULT_POLICY);
    const mixed = { ...DEFAULT_POLICY, windowLimit: 200, bucketLimit: 350, bucketBurst: 100 };
    const bound = boundPolicy(DEFAULT_POLICY, [{ kind: 'ruleReload', region: 'us-east', at: 1, until: 2, policy: mixed }]);
    expect(bound).toEqual({ ...DEFAULT_POLICY, windowLimit: 200, bucketBurst: 100 });
    // A reload to larger limits only: the run's own policy is the tighter one.
    const larger = { ...DEFAULT_POLICY, windowLimit: 400, bucketLimit: 400, bucketBurst: 400 };
    expect(boundPolicy(DEFAULT_POLICY, [{ kind: 'ruleReload', region: 'us-east', at: 1, until: 2, policy: larger }])).toBe(DEFAULT_POLICY);
  });

  for (const quick of [false, true]) {
    it(`rule-reload-mid-window${quick ? ' (quick)' : ''}: one region, larger limits, inside the run`, () => {
      const spec = named('rule-reload-mid-window', quick);
      const [fault] = spec.faults;
      expect(fault?.kind).toBe('ruleReload');
      if (fault?.kind !== 'ruleReload') return;
      // Judged at the run's 300 (the tighter terms), the reload raising us-east's rules to 400.
      expect(fault.policy.windowLimit).toBe(400);
      const bound = boundPolicy(spec.policy!, spec.faults);
      expect(bound.windowLimit).toBe(300);
      expect(bound.windowPeriodMs).toBe(spec.policy!.windowPeriodMs);
      expect(fault.policy.windowPeriodMs).toBe(spec.policy!.windowPeriodMs);
      expect(fault.until).toBeLessThanOrEqual(spec.durationMs);
      expect(spec.alignToWindow).toBe(true);
    });

    it(`redis-snapshot-restart${quick ? ' (quick)' : ''}: snapshot, kill and restart in one window`, () => {
      const spec = named('redis-snapshot-restart', quick);
      const [fault] = spec.faults;
      expect(fault?.kind).toBe('redisSnapshotRestart');
      if (fault?.kind !== 'redisSnapshotRestart') return;
      expect(fault.snapshotAt).toBeLessThan(fault.at);
      expect(fault.at).toBeLessThan(fault.until);
      expect(fault.until).toBeLessThan(spec.durationMs);
      // The run starts with at least durationMs + 0.5 s of its window left (alignToWindow), so all three are in it.
      expect(spec.alignToWindow).toBe(true);
      expect(spec.durationMs).toBeLessThan(spec.policy!.windowPeriodMs);
    });

    it(`region-removed${quick ? ' (quick)' : ''}: mid-window, whole windows after it`, () => {
      const spec = named('region-removed', quick);
      const [fault] = spec.faults;
      expect(fault).toEqual({ kind: 'regionRemoved', region: 'ap-south', at: 2_500 });
      const period = spec.policy!.windowPeriodMs;
      expect(spec.alignToWindow).toBe(true);
      expect(fault!.at % period).toBeGreaterThan(0);
      // Two rolling restarts of a few seconds each, then at least two whole windows.
      expect(spec.durationMs - fault!.at).toBeGreaterThanOrEqual(4 * period);
    });
  }

  it('region-removed traffic: the removed region is sent nothing after its removal, the plan before it unchanged', () => {
    const spec = named('region-removed', false);
    const removals = removalsOf(spec.faults);
    expect(removals).toEqual([{ region: 'ap-south', at: 2_500 }]);
    const without = planTraffic(spec.traffic, spec.durationMs, 7);
    const plan = planTraffic(spec.traffic, spec.durationMs, 7, removals);
    expect(plan).toHaveLength(without.length);
    expect(plan.filter((p) => p.at < 2_500)).toEqual(without.filter((p) => p.at < 2_500));
    const after = plan.filter((p) => p.at >= 2_500);
    expect(after.filter((p) => p.region === 'ap-south')).toHaveLength(0);
    // Only ap-south's requests moved, each to one of the two left, about evenly.
    const moved = after.filter((p, i) => p.region !== without.filter((w) => w.at >= 2_500)[i]!.region);
    expect(moved.length).toBe(without.filter((p) => p.at >= 2_500 && p.region === 'ap-south').length);
    const east = after.filter((p) => p.region === 'us-east').length / after.length;
    expect(east).toBeGreaterThan(0.45);
    expect(east).toBeLessThan(0.55);
  });

  it('a weighted shape keeps its proportions among the regions left', () => {
    const traffic = { ...named('region-removed', false).traffic, shape: { kind: 'weighted' as const, weights: [0.2, 0.6, 0.2] } };
    const plan = planTraffic(traffic, 20_000, 3, [{ region: 'ap-south', at: 0 }]);
    const share = (region: RegionName) => plan.filter((p) => p.region === region).length / plan.length;
    expect(share('ap-south')).toBe(0);
    expect(share('eu-west')).toBeGreaterThan(0.7);
    expect(share('eu-west')).toBeLessThan(0.8);
  });
});

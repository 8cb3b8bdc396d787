// The issue-21 scenarios as data: the reload scenario is judged against the larger of its old and new limits, and
// the snapshot restart's three steps sit in one window of its rule (else the restored state loses nothing current).
import { describe, expect, it } from 'vitest';
import { boundPolicy } from '../../chaos/experiment.ts';
import { scenarios } from '../../chaos/scenarios.ts';
import { DEFAULT_POLICY, type ScenarioSpec } from '../../chaos/types.ts';

function named(name: string, quick: boolean): ScenarioSpec {
  const spec = scenarios({ quick, peer: false }).find((s) => s.name === name);
  if (!spec) throw new Error(`no scenario ${name}`);
  return spec;
}

describe('chaos catalogue: issue-21 scenarios', () => {
  it('boundPolicy takes the larger of the run policy and each reload, periods unchanged', () => {
    expect(boundPolicy(DEFAULT_POLICY, [])).toBe(DEFAULT_POLICY);
    const smaller = { ...DEFAULT_POLICY, windowLimit: 200, bucketLimit: 350, bucketBurst: 100 };
    const bound = boundPolicy(DEFAULT_POLICY, [{ kind: 'ruleReload', region: 'us-east', at: 1, until: 2, policy: smaller }]);
    expect(bound).toEqual({ ...DEFAULT_POLICY, bucketLimit: 350 });
  });

  for (const quick of [false, true]) {
    it(`rule-reload-mid-window${quick ? ' (quick)' : ''}: one region, larger limits, inside the run`, () => {
      const spec = named('rule-reload-mid-window', quick);
      const [fault] = spec.faults;
      expect(fault?.kind).toBe('ruleReload');
      if (fault?.kind !== 'ruleReload') return;
      const bound = boundPolicy(spec.policy!, spec.faults);
      expect(bound.windowLimit).toBe(400);
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
  }
});

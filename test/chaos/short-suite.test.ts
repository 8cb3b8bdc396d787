// The short chaos suite for CI: a real three-region federation (redis-server and service process per region,
// Toxiproxy links), a few scenarios of seconds each. It fails when the federation admits more than the
// configured leakage budget allows. The full catalogue and the sweeps are `npm run chaos -- --all`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScenario } from '../../chaos/experiment.ts';
import { startLab, type Lab } from '../../chaos/lab/federation.ts';
import { scenarios } from '../../chaos/scenarios.ts';
import type { Policy, RunResult, ScenarioSpec } from '../../chaos/types.ts';

const root = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const scratch = mkdtempSync(join(tmpdir(), 'quotafed-chaos-ci-'));
let lab: Lab;
/** Half the lab's default limits, so 120 requests/s (60 per rule) keep both rules at twice their rate. */
const POLICY: Policy = { windowLimit: 150, windowPeriodMs: 5_000, bucketLimit: 150, bucketPeriodMs: 5_000, bucketBurst: 150 };

function ciScenario(name: string): ScenarioSpec {
  const spec = scenarios({ quick: true, peer: false }).find((s) => s.name === name);
  if (!spec) throw new Error(`no scenario ${name}`);
  return { ...spec, durationMs: 6_000, traffic: { ...spec.traffic, ratePerSec: 120 } };
}

async function run(spec: ScenarioSpec): Promise<RunResult> {
  return runScenario(lab, spec, { seed: 1, policy: POLICY, dir: join(scratch, spec.name), concurrency: 32 });
}

function expectWithinBudget(result: RunResult): void {
  for (const rule of ['window', 'bucket'] as const) {
    const budget = result.budget[rule];
    expect(budget, `${rule} budget`).not.toBeNull();
    expect(
      result.quotafed.leakage[rule]?.max ?? 0,
      `${result.scenario.name}: ${rule} rule leakage vs budget ${budget}`,
    ).toBeLessThanOrEqual(budget!);
  }
  expect(result.withinBudget).toBe(true);
  expect(result.valid, `${result.scenario.name} decided with Redis: ${result.notes.join('; ')}`).toBe(true);
  // Under pressure all the time: a run where nothing was refused tested nothing.
  expect(result.quotafed.limited).toBeGreaterThan(0);
  // Every region kept answering (a stray timeout on a starved machine is not a failure of the federation).
  expect(result.quotafed.errors).toBeLessThan(result.quotafed.requests * 0.02);
}

describe('chaos: leakage stays within the budget', { timeout: 60_000 }, () => {
  beforeAll(async () => {
    lab = await startLab({ root, toxiproxyUrl: process.env.TOXIPROXY_URL });
  }, 60_000);
  afterAll(async () => {
    await lab?.close();
    rmSync(scratch, { recursive: true, force: true });
  }, 30_000);

  it('baseline: healthy links, even traffic', async () => {
    const result = await run(ciScenario('baseline'));
    expectWithinBudget(result);
    expect(result.quotafed.admitted).toBeGreaterThan(0);
  });

  it('a full partition of one region, then the heal: every side keeps serving, the bound holds', async () => {
    const spec = ciScenario('partition');
    const result = await run({
      ...spec,
      traffic: { ...spec.traffic, shape: { kind: 'even' } },
      faults: [{ kind: 'partition', region: 'ap-south', at: 1_500, until: 4_000 }],
    });
    expectWithinBudget(result);
    // The cut-off region admitted during the partition (availability), as did the others.
    const during = (region: 'ap-south' | 'us-east') =>
      result.timeline.bins[region]
        .slice(Math.ceil(1_500 / result.timeline.binMs), Math.floor(4_000 / result.timeline.binMs))
        .reduce((a, b) => a + b, 0);
    expect(during('ap-south')).toBeGreaterThan(0);
    expect(during('us-east')).toBeGreaterThan(0);
    // With the gossip running, what each region admitted before the heal reaches every other region.
    if (result.syncLagMs.metric !== null) expect(result.convergenceMs.every((c) => c.ms !== null)).toBe(true);
  });

  it('200 ms of latency on every link', async () => {
    expectWithinBudget(await run(ciScenario('latency-200')));
  });
});

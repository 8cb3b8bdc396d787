// A rule reloaded in one region first (issue 21, item 2, the gossip side): two real regions, the rule's limit
// changed in b only. b skips a's entries of that rule (their counts were made under another limit), counts them
// as rule_mismatch, logs the disagreement once and shows it on /readyz's warnings; once b runs a's parameters
// again the entries merge and the warning is gone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.ts';
import { ruleKey } from '../../src/keys.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';
import { stateFields } from '../support/state-key.ts';
import { captureLog, type CapturedLog } from '../service/fixtures.ts';

let fed: TestFederation;
let a: TestRegion;
let b: TestRegion;
let log: CapturedLog;
const API_KEY = 'rule-mismatch-key';
const KEY = ruleKey('fw', { principal: API_KEY, dimensions: [API_KEY] });
// Costs that cross the silent watermark: every admission is gossiped.
const LOUD_COST = 50;

beforeAll(async () => {
  log = captureLog();
  fed = await startTestFederation({
    names: ['a', 'b'],
    syncIntervalMs: 50,
    logger: log.logger,
    rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '60s' }],
  });
  a = fed.region('a');
  b = fed.region('b');
});
afterAll(async () => {
  await fed?.close();
});

async function skipped(region: TestRegion, reason: string): Promise<number> {
  const metric = await region.registry.getSingleMetric('quotafed_federation_skipped_entries_total')!.get();
  return metric.values.filter((value) => value.labels.reason === reason).reduce((sum, value) => sum + value.value, 0);
}

const withLimit = (config: Config, limit: number): Config => ({
  ...config,
  rules: config.rules.map((rule) => (rule.name === 'fw' ? { ...rule, limit } : rule)),
});

/** a's count as b's state holds it (c<k>.<a's index> of the current window's slot), 0 when b never merged it. */
async function aCountInB(): Promise<number> {
  const state = await stateFields(b.redis, KEY);
  const aIndex = a.federation!.topology.selfIndex;
  return Object.entries(state)
    .filter(([field]) => new RegExp(`^c\\d\\.${aIndex}$`).test(field))
    .reduce((total, [, value]) => total + Number(value), 0);
}

describe('a rule run with other parameters in one region', () => {
  it('is not merged, is counted and said, and merges again once the regions agree', async () => {
    b.federation!.updateRules(withLimit(b.config, 200));
    const decision = await a.engine.decide({ apiKey: API_KEY, ip: '10.0.0.1', method: 'GET', path: '/', cost: LOUD_COST });
    expect(decision.allowed).toBe(true);
    await eventually(async () => expect(await skipped(b, 'rule_mismatch')).toBeGreaterThan(0));
    expect(await aCountInB()).toBe(0);
    expect(b.federation!.warnings()).toEqual([expect.stringContaining('a runs rule "fw" with other parameters')]);
    expect(b.federation!.problems()).toEqual([]);
    expect(log.lines().filter((line) => line.event === 'federation.rule_mismatch')).toHaveLength(1);

    // b back on a's parameters: a's next change merges, and the warning clears.
    b.federation!.updateRules(b.config);
    await a.engine.decide({ apiKey: API_KEY, ip: '10.0.0.1', method: 'GET', path: '/', cost: 1 });
    await eventually(async () => expect(await aCountInB()).toBe(LOUD_COST + 1));
    expect(b.federation!.warnings()).toEqual([]);
  });
});

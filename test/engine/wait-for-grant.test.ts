// The wait for a peer's grant behind rules[].maxWaitMs (src/engine/wait-for-grant.ts): waiting requests of one
// signature take turns, so while no grant has come only one of them re-decides per pause, and a grant lets as many
// decide at once as it has room for.
// The re-decision here is a scripted allowance (the Redis side is tested in test/federation/max-wait.test.ts).
import { describe, expect, it } from 'vitest';
import { createGrantWaits, waitBudgetMs } from '../../src/engine/wait-for-grant.ts';
import type { Rule } from '../../src/config/schema.ts';
import type { Decision, RuleOutcome } from '../../src/engine/types.ts';
import { ruleOutcome } from '../support/outcome.ts';

const outcome = (allowed: boolean, falseDenial: boolean): RuleOutcome =>
  ruleOutcome({ allowed, ...(falseDenial ? { falseDenial: true } : {}) });
const decision = (allowed: boolean, falseDenial = false, remaining = 0): Decision => {
  const only = { ...outcome(allowed, falseDenial), remaining };
  return { allowed, outcomes: [only], binding: only, leases: [] };
};
const mayWait = (d: Decision) => d.outcomes.some((o) => o.falseDenial === true);

describe('waiting for a grant', () => {
  it('one poller while nothing changes; a grant admits the waiters together, up to what it allows', async () => {
    const lot = createGrantWaits();
    let calls = 0;
    let granted = 0; // requests the "grant" has room for
    const redecide = async () => {
      calls++;
      if (granted > 0) {
        granted--;
        return decision(true);
      }
      return decision(false, true);
    };
    const waiting = Array.from({ length: 20 }, () => lot.wait('sig', decision(false, true), 1_000, redecide, mayWait));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // 200 ms of polling at 5, 10, 20, 20… ms: about a dozen decisions in all, not 20 per pause.
    expect(calls).toBeGreaterThan(3);
    expect(calls).toBeLessThan(20);
    const before = calls;
    granted = 15;
    const results = await Promise.all(waiting);
    expect(results.filter((d) => d.allowed)).toHaveLength(15);
    // The five left over waited out their time, one polling at a time.
    expect(results.filter((d) => !d.allowed).every((d) => d.outcomes[0]!.falseDenial)).toBe(true);
    expect(calls - before).toBeLessThan(15 + 5 * 60);
  });

  it("a hot key's grants of one request each cost a decision or two, not one per waiter", async () => {
    const lot = createGrantWaits();
    let calls = 0;
    let granted = 0;
    const redecide = async () => {
      calls++;
      if (granted > 0) {
        granted--;
        return decision(true, false, granted);
      }
      return decision(false, true);
    };
    const waiting = Array.from({ length: 20 }, () => lot.wait('hot', decision(false, true), 3_000, redecide, mayWait));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const before = calls;
    // Ten grants of one request, 50 ms apart: each admits one waiter.
    for (let i = 0; i < 10; i++) {
      granted = 1;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // 500 ms of polling is about 25 decisions, and each grant one or two more (the admitted poller, the next
    // poller's first try); waking all twenty waiters per grant would be about 200.
    expect(calls - before).toBeLessThan(70);
    // A grant the decision says has room for five more: six waiters admitted together, at once.
    granted = 6;
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(granted).toBe(0);
    const results = await Promise.all(waiting);
    expect(results.filter((d) => d.allowed)).toHaveLength(16);
    expect(results.filter((d) => !d.allowed).every((d) => d.outcomes[0]!.falseDenial)).toBe(true);
  });

  it('a true denial ends the wait at once, for the poller and the sleepers', async () => {
    const lot = createGrantWaits();
    let truly = false;
    const redecide = async () => (truly ? decision(false) : decision(false, true));
    const waiting = Array.from({ length: 5 }, () => lot.wait('sig', decision(false, true), 5_000, redecide, mayWait));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = performance.now();
    truly = true;
    const results = await Promise.all(waiting);
    expect(results.every((d) => !d.allowed && d.outcomes[0]!.falseDenial !== true)).toBe(true);
    // Well before the 5 s wait would have run out.
    expect(performance.now() - started).toBeLessThan(2_500);
  });

  it('waits only on false denials of rules with maxWaitMs, for the shortest of them', () => {
    const rules = new Map<string, Rule>([
      ['r', { maxWaitMs: 300 } as Rule],
      ['s', { maxWaitMs: 0 } as Rule],
    ]);
    expect(waitBudgetMs(decision(false, true), rules)).toBe(300);
    expect(waitBudgetMs(decision(false, false), rules)).toBe(0);
    expect(waitBudgetMs(decision(true), rules)).toBe(0);
    const two: Decision = { ...decision(false, true), outcomes: [outcome(false, true), { ...outcome(false, true), rule: 's' }] };
    expect(waitBudgetMs(two, rules)).toBe(0);
  });
});

// The terms a region decides a rule with while a peer runs it with other parameters (rule-identity.ts
// tightenRules): the smallest limit, burst and budget of the regions that disagree, only between rules of the same
// algorithm and period; the config itself when every peer agrees.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { parseRuleTerms, ruleTermsOf, tightenRules } from '../../src/federation/rule-identity.ts';

const configWith = (rule: Record<string, unknown>, leakageBudget: unknown = '5%', maxClockSkewMs = 1_000) =>
  parseConfig({
    region: 'a',
    redis: { url: 'redis://127.0.0.1:1' },
    federation: { leakageBudget, maxClockSkewMs, peers: [{ name: 'b', redisUrl: 'redis://127.0.0.1:2' }] },
    rules: [{ name: 'r', by: ['apiKey'], period: '1m', ...rule }],
  });

describe('tightenRules', () => {
  it('returns the config itself when the peers agree or publish nothing comparable', () => {
    const config = configWith({ algorithm: 'fixedWindow', limit: 100 });
    expect(tightenRules(config, [ruleTermsOf(config, 2)], 2)).toBe(config);
    expect(tightenRules(config, [], 2)).toBe(config);
    const otherPeriod = configWith({ algorithm: 'fixedWindow', limit: 10, period: '30s' });
    expect(tightenRules(config, [ruleTermsOf(otherPeriod, 2)], 2)).toBe(config);
    // A peer with a looser rule holds nothing tighter: the config stays.
    const looser = configWith({ algorithm: 'fixedWindow', limit: 300 });
    expect(tightenRules(config, [ruleTermsOf(looser, 2)], 2)).toBe(config);
  });

  it('takes the smallest limit, burst and budget of every disagreeing peer', () => {
    const ours = configWith({ algorithm: 'tokenBucket', limit: 100, burst: 40 }, 20);
    const peerA = configWith({ algorithm: 'tokenBucket', limit: 80, burst: 60 }, 30);
    const peerB = configWith({ algorithm: 'tokenBucket', limit: 120, burst: 50 }, 5);
    const tight = tightenRules(ours, [ruleTermsOf(peerA, 2), ruleTermsOf(peerB, 2)], 2);
    expect(tight.rules[0]).toMatchObject({ limit: 80, burst: 40, leakageBudget: 5 });
    // The other fields are the rule's own.
    expect(tight.rules[0]!.name).toBe('r');
    expect(tight.rules[0]!.period).toBe(ours.rules[0]!.period);
  });

  it('treats an unbounded budget as the largest', () => {
    const ours = configWith({ algorithm: 'fixedWindow', limit: 100 }, 'unbounded');
    const peer = configWith({ algorithm: 'fixedWindow', limit: 100 }, 7);
    expect(tightenRules(ours, [ruleTermsOf(peer, 2)], 2).rules[0]).toMatchObject({ limit: 100, leakageBudget: 7 });
    expect(tightenRules(peer, [ruleTermsOf(ours, 2)], 2)).toBe(peer);
  });

  it('decides with the larger maxClockSkewMs of a peer that runs one, the rules otherwise as they are', () => {
    const ours = configWith({ algorithm: 'tokenBucket', limit: 100 }, '5%', 1_000);
    const wider = configWith({ algorithm: 'tokenBucket', limit: 100 }, '5%', 3_000);
    const tight = tightenRules(ours, [ruleTermsOf(wider, 2)], 2);
    expect(tight.federation.maxClockSkewMs).toBe(3_000);
    expect(tight.rules[0]).toBe(ours.rules[0]);
    // The region with the larger skew holds to its own: a smaller skew is not tighter.
    expect(tightenRules(wider, [ruleTermsOf(ours, 2)], 2)).toBe(wider);
    // Skew and limit together: the smallest limit and the largest skew.
    const both = configWith({ algorithm: 'tokenBucket', limit: 60 }, '5%', 2_000);
    const merged = tightenRules(ours, [ruleTermsOf(both, 2)], 2);
    expect(merged.federation.maxClockSkewMs).toBe(2_000);
    expect(merged.rules[0]).toMatchObject({ limit: 60 });
    // An older peer's terms without the skew tighten nothing on skew.
    const { skew: _, ...older } = ruleTermsOf(wider, 2).r!;
    expect(tightenRules(ours, [{ r: older }], 2)).toBe(ours);
  });

  it('reads back what a region publishes and skips what it cannot read', () => {
    const config = configWith({ algorithm: 'slidingWindow', limit: 100 });
    const published = JSON.stringify(ruleTermsOf(config, 2));
    expect(parseRuleTerms(published)).toEqual(ruleTermsOf(config, 2));
    expect(parseRuleTerms(null)).toBeNull();
    expect(parseRuleTerms('not json')).toBeNull();
    expect(parseRuleTerms(JSON.stringify({ r: { fingerprint: 'x', limit: 'many' } }))).toEqual({});
  });
});

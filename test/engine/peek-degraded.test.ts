// A peek while Redis cannot decide: the fail modes answer it, and the local fallback counts nothing for it.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { degradedDecision } from '../../src/engine/fail-modes.ts';
import { createRegionFallback } from '../../src/engine/region-fallback.ts';
import { matchRules } from '../../src/engine/rules.ts';

describe('peek under an outage', () => {
  it('answers from the local fallback without spending its share', () => {
    const config = parseConfig({
      region: 'solo',
      breaker: { localFallback: true, instancesPerRegion: 1 },
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 3, period: '1m', failMode: 'open' }],
    });
    const local = createRegionFallback(config, 100, 0);
    const matched = matchRules(config, { apiKey: 'k', ip: '10.0.0.1', method: 'GET', path: '/' });
    const at = 1_800_000_000_000;
    const decide = (peek: boolean) => degradedDecision({ matched, cost: 1, at, settings: config.breaker, local, peek });
    for (let i = 0; i < 5; i++) {
      const peeked = decide(true);
      expect(peeked.allowed).toBe(true);
      expect(peeked.outcomes[0]!.source).toBe('local-fallback');
    }
    // The share (3) is still whole: three admissions, then a denial.
    expect([decide(false), decide(false), decide(false), decide(false)].map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decide(true).allowed).toBe(false);
  });
});

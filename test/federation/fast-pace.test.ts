// The fast lane's pace (src/federation/gossip/fast-pace.ts): a quiet lane sends at once, a busy one at most so many
// runs a second. Pure: virtual clock readings.
import { describe, expect, it } from 'vitest';
import { createFastPace, FAST_LANE_BURST, FAST_RUNS_PER_S } from '../../src/federation/gossip/fast-pace.ts';

describe('fast lane pace', () => {
  it('lets a quiet lane send a burst at once, then one run per 1/rate', () => {
    const pace = createFastPace(10, 5);
    for (let i = 0; i < 5; i++) {
      expect(pace.wait(1_000)).toBe(0);
      pace.spend(1_000);
    }
    expect(pace.wait(1_000)).toBe(100);
    expect(pace.wait(1_050)).toBe(50);
    expect(pace.wait(1_100)).toBe(0);
    pace.spend(1_100);
    expect(pace.wait(1_100)).toBe(100);
  });

  it('refills to the burst after a quiet spell, never beyond it', () => {
    const pace = createFastPace(10, 5);
    for (let i = 0; i < 5; i++) pace.spend(0);
    let sent = 0;
    // An hour of silence refills five runs, not 36,000.
    for (let now = 3_600_000; pace.wait(now) === 0; sent++) pace.spend(now);
    expect(sent).toBe(5);
  });

  it('holds a busy lane to the rate over a long run', () => {
    const pace = createFastPace();
    let now = 0;
    let runs = 0;
    // A lane woken every millisecond for ten seconds sends when the pace lets it.
    for (; now < 10_000; now++) {
      if (pace.wait(now) === 0) {
        pace.spend(now);
        runs++;
      }
    }
    expect(runs).toBeGreaterThanOrEqual(10 * FAST_RUNS_PER_S);
    expect(runs).toBeLessThanOrEqual(10 * FAST_RUNS_PER_S + FAST_LANE_BURST);
  });

  it('refills nothing for a clock reading earlier than the last', () => {
    const pace = createFastPace(10, 1);
    pace.spend(500);
    expect(pace.wait(400)).toBe(100);
    expect(pace.wait(550)).toBe(50);
  });

  it('refuses a pace that could never send', () => {
    expect(() => createFastPace(0, 5)).toThrow(/perSecond > 0/);
    expect(() => createFastPace(10, 0)).toThrow(/burst >= 1/);
  });
});

// The breaker's own sliding window: what it counts, and that old calls leave it.
import { describe, expect, it } from 'vitest';
import { SamplingWindow } from '../../src/engine/breaker.ts';

describe('breaker sampling window', () => {
  it('counts calls of the last window and forgets those older than it, bucket by bucket', () => {
    const window = new SamplingWindow(5_000); // five 1 s buckets
    const t0 = 1_000_000;
    for (let i = 0; i < 4; i++) window.record(false, t0);
    window.record(true, t0 + 1_000);
    expect({ failures: window.failures, successes: window.successes }).toEqual({ failures: 4, successes: 1 });
    window.record(true, t0 + 4_500);
    expect(window.failures).toBe(4); // still within 5 s
    window.record(true, t0 + 5_500); // a new bucket: the one that started at t0 is 5 s old and empties
    expect({ failures: window.failures, successes: window.successes }).toEqual({ failures: 0, successes: 3 });
  });

  it('forgets old failures under sparse traffic (one call a minute)', () => {
    const window = new SamplingWindow(10_000);
    const t0 = 1_000_000;
    for (let i = 0; i < 4; i++) window.record(false, t0);
    window.record(true, t0 + 60_000);
    expect({ failures: window.failures, successes: window.successes }).toEqual({ failures: 0, successes: 1 });
  });

  it('starts empty after a reset', () => {
    const window = new SamplingWindow(10_000);
    window.record(false, 1);
    window.record(true, 2);
    window.reset();
    expect({ failures: window.failures, successes: window.successes }).toEqual({ failures: 0, successes: 0 });
  });
});

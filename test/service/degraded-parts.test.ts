// The pieces the outage test runs end to end, checked alone: the breaker's state machine and the local
// fallback's arithmetic and memory bound.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createBreaker } from '../../src/engine/breaker.ts';
import { createLocalFallback } from '../../src/engine/local-fallback.ts';
import { silentLogger } from '../../src/log.ts';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('breaker', () => {
  it('opens on a failure ratio over the sampling window (with a minimum), and closes after enough consecutive good probes', async () => {
    let healthy = false;
    let probes = 0;
    const transitions: string[] = [];
    const breaker = createBreaker({
      settings: { failureThreshold: 3, failureRatio: 0.5, samplingWindowMs: 10_000, probeIntervalMs: 10, successThreshold: 2 },
      probe: async () => {
        probes += 1;
        if (!healthy) throw new Error('down');
      },
      logger: silentLogger(),
      region: 'unit',
      onTransition: (state) => transitions.push(state),
    });
    try {
      // A busy but healthy Redis: some calls time out, most succeed. 20 successes, 20 failures: 50 %, not above.
      for (let i = 0; i < 20; i++) breaker.recordSuccess();
      for (let i = 0; i < 20; i++) breaker.recordFailure(new Error(`slow ${i}`));
      expect(breaker.state).toBe('closed');
      breaker.recordFailure(new Error('e')); // 21 of 41: above half
      expect(breaker.state).toBe('open');
      expect(breaker.reason).toBe('e');

      for (let i = 0; i < 100 && probes < 3; i++) await wait(10);
      expect(probes).toBeGreaterThanOrEqual(3);
      expect(breaker.state).toBe('open');

      healthy = true;
      for (let i = 0; i < 100 && breaker.state === 'open'; i++) await wait(10);
      expect(breaker.state).toBe('closed');
      expect(transitions).toEqual(['open', 'closed']);
      const after = probes;
      await wait(50);
      expect(probes).toBe(after); // a closed breaker does not probe

      // Closing started a fresh sample: a failure ratio needs failureThreshold failures again.
      breaker.recordFailure(new Error('x'));
      breaker.recordFailure(new Error('y'));
      expect(breaker.state).toBe('closed');
      breaker.recordFailure(new Error('z'));
      expect(breaker.state).toBe('open');
    } finally {
      breaker.stop();
    }
  });
});

describe('local fallback', () => {
  const config = parseConfig({
    region: 'unit',
    rules: [
      { name: 'window', algorithm: 'fixedWindow', limit: 10, period: '1m', by: ['apiKey'] },
      { name: 'bucket', algorithm: 'tokenBucket', limit: 60, burst: 4, period: '1m', by: ['apiKey'] },
      { name: 'slots', algorithm: 'concurrency', limit: 4, by: ['apiKey'] },
    ],
  });
  const [window, bucket, slots] = config.rules as [(typeof config.rules)[0], (typeof config.rules)[0], (typeof config.rules)[0]];
  const at = 1_800_000_000_000; // on a minute boundary

  it('enforces limit / instances for windows and buckets, refilling buckets over time', () => {
    const local = createLocalFallback({ instancesPerRegion: 2 });
    const w = Array.from({ length: 7 }, () => local.decide([{ rule: window, key: 'w' }], 1, at).allowed);
    expect(w).toEqual([true, true, true, true, true, false, false]);
    expect(local.decide([{ rule: window, key: 'w' }], 1, at + 60_000).allowed).toBe(true); // next window

    const b = Array.from({ length: 3 }, () => local.decide([{ rule: bucket, key: 'b' }], 1, at).allowed);
    expect(b).toEqual([true, true, false]); // burst 4 / 2 instances
    // 30 per minute per instance: one token every 2 s.
    expect(local.decide([{ rule: bucket, key: 'b' }], 1, at + 2_000).allowed).toBe(true);
  });

  it('consumes nothing when any rule denies', () => {
    const local = createLocalFallback({ instancesPerRegion: 1 });
    const both = [
      { rule: window, key: 'w' },
      { rule: bucket, key: 'b' },
    ];
    for (let i = 0; i < 4; i++) expect(local.decide(both, 1, at).allowed).toBe(true);
    for (let i = 0; i < 5; i++) expect(local.decide(both, 1, at).allowed).toBe(false); // bucket empty
    const windowOnly = local.decide([{ rule: window, key: 'w' }], 1, at);
    expect(windowOnly.outcomes[0]!.remaining).toBe(10 - 5);
  });

  it('counts concurrency slots until their leases are released', () => {
    const local = createLocalFallback({ instancesPerRegion: 2 });
    const first = local.decide([{ rule: slots, key: 's' }], 1, at);
    const second = local.decide([{ rule: slots, key: 's' }], 1, at);
    expect([first.allowed, second.allowed]).toEqual([true, true]);
    expect(local.decide([{ rule: slots, key: 's' }], 1, at).allowed).toBe(false);
    expect(local.release(first.leases)).toEqual([]);
    expect(local.decide([{ rule: slots, key: 's' }], 1, at).allowed).toBe(true);
    // Leases that are not local are handed back for Redis.
    expect(local.release([{ key: 'qf:{s1}:x:y', id: 'abc', slots: 1 }])).toHaveLength(1);
  });

  it('keeps window counts for Redis (unsettled) until settled, and prunes only what can no longer matter', () => {
    const local = createLocalFallback({ instancesPerRegion: 1 });
    for (let i = 0; i < 3; i++) local.decide([{ rule: window, key: 'w', shard: 7 }], 1, at);
    local.decide([{ rule: bucket, key: 'b' }], 1, at);
    expect(local.unsettled(at)).toEqual([{ rule: window, key: 'w', shard: 7, windowStart: at, count: 3 }]);
    local.prune(at + 1_000); // window still running: kept (a breaker flap must not re-issue the share)
    expect(local.decide([{ rule: window, key: 'w' }], 1, at + 1_000).outcomes[0]!.remaining).toBe(10 - 4);
    local.settled(local.unsettled(at + 1_000));
    expect(local.unsettled(at + 1_000)).toEqual([]);
    local.prune(at + 60_000); // the window ended and nothing is left to settle; the bucket refilled long ago
    expect(local.size).toBe(0);
  });

  it('keeps at most `capacity` keys: a new key is refused while the others still count, never evicted', () => {
    const local = createLocalFallback({ instancesPerRegion: 1, capacity: 100 });
    // k0 spends its whole share (10 per window), then 10,000 other keys pass through the same window.
    for (let i = 0; i < 10; i++) expect(local.decide([{ rule: window, key: 'k0' }], 1, at).allowed).toBe(true);
    let admittedOthers = 0;
    for (let i = 1; i < 10_000; i++) if (local.decide([{ rule: window, key: `k${i}` }], 1, at).allowed) admittedOthers += 1;
    expect(local.size).toBe(100);
    expect(admittedOthers).toBe(99);
    // An evicting cache would have forgotten k0 and handed its share out again in the same window.
    expect(local.decide([{ rule: window, key: 'k0' }], 1, at).allowed).toBe(false);
    // Once Redis has counted them and their window ended, the keys no longer matter and room returns.
    local.settled(local.unsettled(at));
    expect(local.decide([{ rule: window, key: 'k-next' }], 1, at + window.period).allowed).toBe(true);
  });

  it('a process started mid-window admits nothing locally in that window; its buckets start empty', () => {
    // The first process of this instance spends the share of the running window, then dies with it unsettled.
    const first = createLocalFallback({ instancesPerRegion: 1, capacity: 100 });
    for (let i = 0; i < 10; i++) expect(first.decide([{ rule: window, key: 'k' }], 1, at).allowed).toBe(true);
    const restartedAt = at + 1_000;
    const second = createLocalFallback({ instancesPerRegion: 1, capacity: 100, startedAtMs: restartedAt });
    // Without the guard it would admit the share again: 20 in a window whose local bound is 10.
    expect(second.decide([{ rule: window, key: 'k' }], 1, restartedAt + 1).allowed).toBe(false);
    const windowStart = at - (at % window.period);
    expect(second.decide([{ rule: window, key: 'k' }], 1, windowStart + window.period).allowed).toBe(true);

    const tenPerMinute = { ...window, name: 'tb', algorithm: 'tokenBucket' as const, burst: 10 };
    // 10 tokens per period refill at 10/period: 0.1 s after the start, one token is there, not ten.
    const tokensAt = (ms: number) => {
      const probe = createLocalFallback({ instancesPerRegion: 1, capacity: 100, startedAtMs: restartedAt });
      let admitted = 0;
      while (probe.decide([{ rule: tenPerMinute, key: 'b' }], 1, restartedAt + ms).allowed) admitted += 1;
      return admitted;
    };
    expect(tokensAt(0)).toBe(0);
    expect(tokensAt(window.period / 10)).toBe(1);
    expect(tokensAt(window.period * 2)).toBe(10);
  });
});

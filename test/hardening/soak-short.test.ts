// The CI-sized soak: the same run as `npm run soak` (bench/soak.ts) for 25 s. One service
// process under load from another process, Redis paused and killed in between; the heap's live set stays flat
// and every concurrency slot is back within the lease TTL after the load stops.
import { describe, expect, it } from 'vitest';
import { judge, runSoak, type Sample } from '../../bench/soak.ts';

const series = (heap: (i: number) => number): Sample[] =>
  Array.from({ length: 30 }, (_, i) => ({
    t: i * 5,
    rssMb: 150,
    heapUsedMb: heap(i),
    heapTotalMb: 120,
    liveSlots: 0,
    localFallbackKeys: 0,
    breakerOpen: false,
    decisionsPerSec: 100,
    phase: i < 6 ? 'warmup' : 'load',
  }));

describe('soak verdict', () => {
  it('fails a growing live set and leaked slots, passes a flat sawtooth', () => {
    const sawtooth = (i: number) => 40 + (i % 4) * 15;
    expect(judge(series(sawtooth), { maxHeapGrowthMb: 24 }, 0).ok).toBe(true);
    const leaking = judge(
      series((i) => sawtooth(i) + 2 * i),
      { maxHeapGrowthMb: 24 },
      0,
    );
    expect(leaking.ok).toBe(false);
    expect(leaking.reasons.join()).toMatch(/heap live set grew/);
    expect(judge(series(sawtooth), { maxHeapGrowthMb: 24 }, 3).reasons.join()).toMatch(/3 concurrency slots/);
    expect(judge(series(sawtooth), { maxHeapGrowthMb: 24 }, null).ok).toBe(false);
  });
});

describe('short soak', () => {
  it('keeps memory flat and leaks no concurrency slots through load and Redis hiccups', async () => {
    const lines: string[] = [];
    const result = await runSoak({
      seconds: 25,
      rate: 200,
      sampleMs: 2_000,
      hiccupEveryMs: 8_000,
      warmupMs: 7_000,
      maxHeapGrowthMb: 24,
      outDir: undefined,
      name: 'soak-ci',
      log: (line) => lines.push(line),
    });
    const context = `${result.verdict.reasons.join('; ')}\n${lines.slice(-40).join('\n')}`;
    expect(result.verdict.ok, context).toBe(true);
    expect(result.verdict.leakedSlots).toBe(0);
    expect(result.verdict.heapGrowthMb).toBeLessThanOrEqual(24);
    // Not vacuous: load ran, slots were in use, leases were released, hot keys were denied, Redis hiccupped.
    const outcomes = result.load.byOutcome;
    expect(result.load.requests).toBeGreaterThan(500);
    expect(Math.max(...result.samples.map((s) => s.liveSlots ?? 0))).toBeGreaterThan(0);
    expect(outcomes['check-release released 200'] ?? 0).toBeGreaterThan(0);
    expect(outcomes['slow 200'] ?? 0).toBeGreaterThan(0);
    expect(outcomes['hot 429'] ?? 0).toBeGreaterThan(0);
    expect(result.hiccups.length).toBeGreaterThanOrEqual(2);
    expect(Object.keys(outcomes).filter((k) => /\b5\d\d\b/.test(k) && !/\b50[24]\b/.test(k))).toEqual([]);
  }, 120_000);
});

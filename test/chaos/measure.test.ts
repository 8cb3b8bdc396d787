// The lab's arithmetic, on hand-made traces whose right answers are known.
import { describe, expect, it } from 'vitest';
import { exactBucket, exactWindow, underAdmission } from '../../chaos/measure/exact.ts';
import { bucketLeakage, windowLeakage } from '../../chaos/measure/leakage.ts';
import { histogramQuantile, readHistogram } from '../../chaos/measure/prometheus.ts';
import { removalNotes } from '../../chaos/measure/removal.ts';
import { lineChart, timelineChart } from '../../chaos/report/svg.ts';
import { planPattern, planTraffic } from '../../chaos/traffic.ts';
import type { Decision } from '../../chaos/types.ts';

function decision(t: number, outcome: Decision['outcome'], extra: Partial<Decision> = {}): Decision {
  return { t, region: 'us-east', key: 'k', rule: 'window', outcome, window: 0, ...extra };
}

describe('window leakage', () => {
  it('counts admissions beyond the limit per key and window, not across them', () => {
    const trace = [
      ...Array.from({ length: 12 }, (_, i) => decision(i, 'admitted', { window: 1 })),
      ...Array.from({ length: 9 }, (_, i) => decision(100 + i, 'admitted', { window: 2 })),
      ...Array.from({ length: 11 }, (_, i) => decision(i, 'admitted', { window: 1, key: 'other' })),
      decision(50, 'limited', { window: 1 }),
    ];
    const result = windowLeakage(trace, 10);
    expect(result.max).toBe(2);
    expect(result.total).toBe(3);
    expect(result.percent).toBe(20);
    expect(result.worst).toEqual({ key: 'k', window: 1 });
  });
});

describe('bucket leakage', () => {
  it('is zero for a trace a single exact bucket could have admitted', () => {
    // Capacity 5, one token per 100 ms: a burst of 5, then one every 100 ms.
    const trace = [
      ...Array.from({ length: 5 }, () => decision(0, 'admitted')),
      ...Array.from({ length: 10 }, (_, i) => decision(100 * (i + 1), 'admitted')),
    ];
    expect(bucketLeakage(trace, 5, 0.01).max).toBe(0);
  });

  it('finds the interval with the largest excess over capacity + rate × T', () => {
    // Capacity 5 at 1 token per 100 ms; 9 admissions within 100 ms allow at most 5 + 1 = 6.
    const trace = [decision(0, 'admitted'), ...Array.from({ length: 8 }, (_, i) => decision(1_000 + (i * 100) / 7, 'admitted'))];
    const result = bucketLeakage(trace, 5, 0.01);
    expect(result.max).toBe(2);
    expect(result.worst).toMatchObject({ key: 'k', fromMs: 1_000, toMs: 1_100 });
  });

  it('ignores refused requests', () => {
    const trace = Array.from({ length: 20 }, (_, i) => decision(i, i < 5 ? 'admitted' : 'limited'));
    expect(bucketLeakage(trace, 5, 0.001).max).toBe(0);
  });
});

describe('the exact global limiter', () => {
  it('admits the first `limit` requests of each window by time; under-admission is what it admitted and the federation refused', () => {
    const trace = [
      decision(3, 'limited', { region: 'eu-west' }),
      decision(1, 'admitted'),
      decision(2, 'admitted'),
      decision(4, 'admitted'),
      decision(5, 'error'),
    ];
    const verdicts = exactWindow(trace, 3);
    expect([...verdicts.entries()].map(([d, admit]) => [d.t, admit])).toEqual([
      [1, true],
      [2, true],
      [3, true],
      [4, false],
    ]);
    expect(underAdmission(verdicts)).toEqual({ refused: 1, exactAdmitted: 3, percent: 100 / 3 });
  });

  it('refills a token bucket continuously up to its capacity', () => {
    const trace = [0, 0, 0, 50, 100, 1_000].map((t) => decision(t, 'admitted', { rule: 'bucket' }));
    const admitted = [...exactBucket(trace, 2, 0.01).values()];
    // Two from the full bucket, none at 0 and 50 ms, one token by 100 ms, full again by 1 s.
    expect(admitted).toEqual([true, true, false, false, true, true]);
  });
});

describe('Prometheus histograms', () => {
  const page = [
    '# TYPE quotafed_federation_sync_lag_seconds histogram',
    'quotafed_federation_sync_lag_seconds_bucket{peer="a",le="0.1"} 50',
    'quotafed_federation_sync_lag_seconds_bucket{peer="a",le="0.2"} 90',
    'quotafed_federation_sync_lag_seconds_bucket{peer="a",le="+Inf"} 100',
    'quotafed_federation_sync_lag_seconds_sum{peer="a"} 12',
    'quotafed_federation_sync_lag_seconds_count{peer="a"} 100',
  ].join('\n');

  it('interpolates quantiles inside the bucket, summing label sets and pages', () => {
    const merged = readHistogram(page, 'quotafed_federation_sync_lag_seconds', readHistogram(page, 'quotafed_federation_sync_lag_seconds'));
    expect(merged.count).toBe(200);
    expect(histogramQuantile(merged, 0.5)).toBeCloseTo(0.1);
    expect(histogramQuantile(merged, 0.7)).toBeCloseTo(0.15);
    // Beyond the last finite bucket the answer is that bucket's bound.
    expect(histogramQuantile(merged, 0.99)).toBeCloseTo(0.2);
  });

  it('has no quantile without observations', () => {
    expect(histogramQuantile(readHistogram('', 'x'), 0.5)).toBeNull();
  });
});

describe('traffic plans', () => {
  it('are the same for the same seed and differ for another', () => {
    const spec = { ratePerSec: 200, shape: { kind: 'even' as const }, windowShare: 0.5, hotKey: { hotShare: 0.7, coldKeys: 10 } };
    const a = planTraffic(spec, 2_000, 7);
    expect(planTraffic(spec, 2_000, 7)).toEqual(a);
    expect(planTraffic(spec, 2_000, 8)).not.toEqual(a);
    expect(a.length).toBeGreaterThan(300);
    expect(a.length).toBeLessThan(500);
    expect(a.every((p, i) => i === 0 || p.at >= a[i - 1]!.at)).toBe(true);
    const hot = a.filter((p) => p.key === 'hot').length / a.length;
    expect(hot).toBeGreaterThan(0.6);
    expect(hot).toBeLessThan(0.8);
  });

  it('send everything to one region at a time when shifting', () => {
    const plan = planTraffic({ ratePerSec: 100, shape: { kind: 'shifting', everyMs: 1_000 }, windowShare: 1 }, 3_000, 1);
    expect(new Set(plan.filter((p) => p.at < 1_000).map((p) => p.region))).toEqual(new Set(['us-east']));
    expect(new Set(plan.filter((p) => p.at >= 1_000 && p.at < 2_000).map((p) => p.region))).toEqual(new Set(['eu-west']));
  });

  it('burst patterns: N per rule into one region, evenly over the spread, the bucket burst after the gap', () => {
    const pattern = { kind: 'burst' as const, region: 'us-east' as const, requests: 100, spreadMs: 1_000, ruleGapMs: 2_500 };
    const plan = planTraffic({ ratePerSec: 1, shape: { kind: 'even' }, windowShare: 0.5, pattern }, 10_000, 1);
    expect(plan).toEqual(planPattern(pattern));
    const window = plan.filter((p) => p.rule === 'window');
    const bucket = plan.filter((p) => p.rule === 'bucket');
    expect([window.length, bucket.length]).toEqual([100, 100]);
    expect(new Set(plan.map((p) => `${p.region} ${p.key}`))).toEqual(new Set(['us-east k1']));
    expect(window[0]!.at).toBe(0);
    expect(window.at(-1)!.at).toBeCloseTo(990);
    expect(bucket[0]!.at).toBe(2_500);
    expect(plan.every((p, i) => i === 0 || p.at >= plan[i - 1]!.at)).toBe(true);
    // spreadMs 0: all at once.
    expect(new Set(planPattern({ ...pattern, spreadMs: 0, ruleGapMs: 0 }).map((p) => p.at))).toEqual(new Set([0]));
  });

  it('sequential pattern: each region in turn, rules alternating, offsets carrying only the pauses', () => {
    const plan = planPattern({ kind: 'sequential', regions: ['us-east', 'eu-west', 'ap-south'], perRegion: 3, pauseMs: 1_500 });
    expect(plan.map((p) => `${p.region}:${p.rule}:${p.at}`)).toEqual([
      ...['window', 'bucket', 'window', 'bucket', 'window', 'bucket'].map((rule) => `us-east:${rule}:0`),
      ...['window', 'bucket', 'window', 'bucket', 'window', 'bucket'].map((rule) => `eu-west:${rule}:1500`),
      ...['window', 'bucket', 'window', 'bucket', 'window', 'bucket'].map((rule) => `ap-south:${rule}:3000`),
    ]);
  });
});

describe('SVG charts', () => {
  it('draw every series and the shaded faults as well-formed markup', () => {
    const line = lineChart({
      title: 'a < b',
      xLabel: 'x',
      yLabel: 'y',
      xLog: true,
      series: [
        {
          name: 's',
          color: '#000',
          points: [
            [50, 1],
            [5_000, 3],
          ],
        },
      ],
    });
    expect(line).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    expect(line).toContain('a &lt; b');
    expect(line.match(/<circle /g)).toHaveLength(2);
    const timeline = timelineChart({
      title: 't',
      binMs: 250,
      yLabel: 'n',
      series: [
        {
          name: 'r',
          color: '#000',
          points: [
            [0, 1],
            [1, 2],
          ],
        },
      ],
      shades: [{ fromMs: 100, toMs: 300, label: 'partition' }],
    });
    expect(timeline).toContain('fill="#f4a582"');
    expect(timeline.trim().endsWith('</svg>')).toBe(true);
  });
});

describe('removal notes', () => {
  // Run start 0.5 s into window 10 of 1 s windows (window w spans w − 10.5 … w − 9.5 s of run time).
  const removal = {
    region: 'ap-south' as const,
    startEpochMs: 10_500,
    changedAtMs: 1_200,
    durationMs: 4_000,
    windowLimit: 30,
    windowPeriodMs: 1_000,
    budget: 3,
  };
  const admitted = (window: number, region: Decision['region'], count: number) =>
    Array.from({ length: count }, (_, i) =>
      decision((window - 10.5) * 1_000 + 500 + i, 'admitted', { window: window, region, rule: 'window' }),
    );

  it('counts per window and region, and finds the share returned in the first window after the change', () => {
    const trace = [
      ...admitted(10, 'ap-south', 9),
      ...admitted(10, 'us-east', 10),
      ...admitted(12, 'us-east', 16),
      ...admitted(12, 'eu-west', 14),
      decision(1_800, 'limited', { window: 12, region: 'eu-west' }),
      decision(900, 'error', { region: 'eu-west', rule: 'bucket' }),
    ];
    const [perWindow, errors, share] = removalNotes(trace, removal);
    expect(perWindow).toBe(
      'window rule admitted per window (us-east / eu-west / ap-south): 0.0–0.5 s (partial): 10 / 0 / 9 = 19; 1.5–2.5 s: 16 / 14 / 0 = 30',
    );
    expect(errors).toBe('requests without a decision (a region stopping or restarting), both rules: us-east 0, eu-west 1, ap-south 0');
    // Changed at 1.2 s (window 11): window 12 is the first after; 16 > (30 + 3) / 3 = 11.
    expect(share).toMatch(/^ap-south's share returned: in 1\.5–2\.5 s, .* us-east 16, eu-west 14 \(ap-south 0; total 30 of 30\)/);
  });

  it('says so when the run ended before a whole window after the change', () => {
    const notes = removalNotes(admitted(10, 'us-east', 5), { ...removal, changedAtMs: 3_000 });
    expect(notes.at(-1)).toMatch(/^no full window after the change was observed/);
  });

  it('says the share did NOT return when no region left went past its old share', () => {
    const notes = removalNotes([...admitted(12, 'us-east', 11), ...admitted(12, 'eu-west', 10)], removal);
    expect(notes.at(-1)).toMatch(/^ap-south's share did NOT return/);
  });
});

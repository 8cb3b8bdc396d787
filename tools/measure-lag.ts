// Measures sync lag (admission in one region until visible in another) on three local regions:
//   npx tsx tools/measure-lag.ts [syncIntervalMs=100] [seconds=8]
// Two figures: (1) end to end, sequential probes: admit once in a random region, poll another region's hash
// every 2 ms until it shows the admission; (2) the federation's own histogram
// (quotafed_federation_sync_lag_seconds) under concurrent background traffic, quantiles interpolated in buckets.
import { federationKeyView } from '../src/federation/admin-view.ts';
import { startTestFederation } from '../test/support/federation.ts';

const interval = Number(process.argv[2] ?? 100);
const seconds = Number(process.argv[3] ?? 8);

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const fed = await startTestFederation({
  syncIntervalMs: interval,
  rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000_000, period: '1h' }],
});
try {
  const deadline = Date.now() + seconds * 1000;
  let background = 0;
  const traffic = (async () => {
    while (Date.now() < deadline) {
      const region = fed.regions[background % 3]!;
      await region.engine.decide({ apiKey: `bg-${background % 200}`, ip: '10.0.0.1', method: 'GET', path: '/' });
      background++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();

  const probes: number[] = [];
  for (let i = 0; Date.now() < deadline - 1_000 && i < 1_000; i++) {
    const from = fed.regions[i % 3]!;
    const to = fed.regions[(i + 1 + (i % 2)) % 3]!;
    const apiKey = `probe-${i}-${Math.random()}`;
    const started = performance.now();
    await from.engine.decide({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/' });
    for (let polls = 0; polls < 5_000; polls++) {
      const view = await federationKeyView(to.config, to.redis, 'fw', { apiKey });
      if (view.windows.some((w) => w.consumption[from.name] === 1)) break;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    probes.push(performance.now() - started);
  }
  await traffic;

  const sorted = probes.sort((a, b) => a - b);
  console.log(`syncIntervalMs=${interval}, ${seconds}s, background decisions=${background}`);
  console.log(
    `end-to-end probes: n=${sorted.length} p50=${quantile(sorted, 0.5).toFixed(1)} ms p99=${quantile(sorted, 0.99).toFixed(1)} ms ` +
      `max=${sorted.at(-1)!.toFixed(1)} ms`,
  );

  // Merge the histograms of the three regions and interpolate quantiles inside the buckets.
  const buckets = new Map<number, number>();
  let count = 0;
  for (const region of fed.regions) {
    const metric = await region.registry.getSingleMetric('quotafed_federation_sync_lag_seconds')!.get();
    for (const value of metric.values as { metricName?: string; labels: Record<string, string | number>; value: number }[]) {
      if (value.metricName?.endsWith('_bucket')) {
        const le = value.labels.le === '+Inf' ? Infinity : Number(value.labels.le);
        buckets.set(le, (buckets.get(le) ?? 0) + value.value);
      } else if (value.metricName?.endsWith('_count')) count += value.value;
    }
  }
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const histogramQuantile = (q: number) => {
    const target = q * count;
    let lower = 0;
    let below = 0;
    for (const bound of bounds) {
      const cumulative = buckets.get(bound)!;
      if (cumulative >= target) {
        if (!Number.isFinite(bound)) return lower;
        return lower + ((bound - lower) * (target - below)) / Math.max(1, cumulative - below);
      }
      lower = bound;
      below = cumulative;
    }
    return lower;
  };
  console.log(
    `histogram quotafed_federation_sync_lag_seconds: n=${count} p50≈${(histogramQuantile(0.5) * 1000).toFixed(1)} ms ` +
      `p99≈${(histogramQuantile(0.99) * 1000).toFixed(1)} ms`,
  );
} finally {
  await fed.close();
}

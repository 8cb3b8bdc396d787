// Reads the dashboard's numbers from the prom-client registry, so the page shows exactly what /metrics says.
// Counters become rates by differencing two readings; the first reading gives rate 0. A metric read here carries
// only its own labels (the registry adds the default `region` when it serialises), so a series with an explicit
// `region` counts for that region only and one without it belongs to the region this process serves.
import type { Registry } from 'prom-client';
import type { BreakerView, EndpointRate } from './types.ts';

const REJECTIONS = 'quotafed_http_429_total';
const DECISIONS = 'quotafed_decisions_total';
const BREAKER_STATE = 'quotafed_breaker_state';
const BREAKER_TRANSITIONS = 'quotafed_breaker_transitions_total';
const SYNC_LAG = 'quotafed_federation_sync_lag_seconds';
const FALSE_DENIALS = 'quotafed_federation_false_denials_total';
const STRANDED = 'quotafed_federation_stranded_allowance_total';

interface MetricValue {
  value: number;
  labels: Record<string, string | number | undefined>;
  metricName?: string;
}

interface MetricJson {
  name: string;
  values: MetricValue[];
}

export interface MetricsReading {
  endpoints: EndpointRate[];
  breaker: BreakerView;
  /** Mean sync lag from each peer into this region over the last interval with observations, by peer. */
  syncLagMs: Map<string, number>;
  /** False denials since start, by rule. */
  falseDenials: Map<string, number>;
  /** Allowance stranded at window end (unused here while a peer was hungry) since start, by rule. */
  stranded: Map<string, number>;
}

export interface MetricsReader {
  read(): Promise<MetricsReading>;
}

function sumBy(metric: MetricJson | undefined, label: string, region: string): Map<string, number> {
  const totals = new Map<string, number>();
  for (const { value, labels } of metric?.values ?? []) {
    if (labels.region !== undefined && labels.region !== region) continue;
    const key = String(labels[label] ?? '');
    totals.set(key, (totals.get(key) ?? 0) + value);
  }
  return totals;
}

function valueFor(metric: MetricJson | undefined, region: string): number | undefined {
  const values = metric?.values ?? [];
  return (values.find((entry) => entry.labels.region === region) ?? (values.length === 1 ? values[0] : undefined))?.value;
}

/** Histogram sum and count per peer, for this region's series. */
function lagTotals(metric: MetricJson | undefined, region: string): Map<string, { sum: number; count: number }> {
  const totals = new Map<string, { sum: number; count: number }>();
  for (const { value, labels, metricName } of metric?.values ?? []) {
    if (labels.region !== region || typeof labels.peer !== 'string') continue;
    const entry = totals.get(labels.peer) ?? { sum: 0, count: 0 };
    if (metricName?.endsWith('_sum')) entry.sum = value;
    else if (metricName?.endsWith('_count')) entry.count = value;
    totals.set(labels.peer, entry);
  }
  return totals;
}

export function createMetricsReader(registry: Registry, region: string, now: () => number = Date.now): MetricsReader {
  let previous: { at: number; rejections: Map<string, number>; decisions: Map<string, number> } | undefined;
  let previousLag = new Map<string, { sum: number; count: number }>();
  const lastLagMs = new Map<string, number>();

  return {
    async read() {
      // Only the metrics the page needs: serialising the whole registry every second would be waste.
      const wanted = [REJECTIONS, DECISIONS, BREAKER_STATE, BREAKER_TRANSITIONS, SYNC_LAG, FALSE_DENIALS, STRANDED];
      const metrics = new Map<string, MetricJson>();
      for (const name of wanted) {
        const metric = registry.getSingleMetric(name);
        if (metric) metrics.set(name, (await metric.get()) as unknown as MetricJson);
      }
      const at = now();
      const rejections = sumBy(metrics.get(REJECTIONS), 'endpoint', region);
      const decisions = sumBy(metrics.get(DECISIONS), 'endpoint', region);
      const seconds = previous ? Math.max((at - previous.at) / 1000, 0.001) : 0;
      const rate = (totals: Map<string, number>, before: Map<string, number> | undefined, endpoint: string) =>
        before === undefined || seconds === 0 ? 0 : Math.max(0, (totals.get(endpoint) ?? 0) - (before.get(endpoint) ?? 0)) / seconds;

      const names = [...new Set([...rejections.keys(), ...decisions.keys()])].sort();
      const endpoints: EndpointRate[] = names.map((endpoint) => ({
        endpoint,
        rejectedPerSec: rate(rejections, previous?.rejections, endpoint),
        rejectedTotal: rejections.get(endpoint) ?? 0,
        decisionsPerSec: rate(decisions, previous?.decisions, endpoint),
      }));
      previous = { at, rejections, decisions };

      const lag = lagTotals(metrics.get(SYNC_LAG), region);
      for (const [peer, { sum, count }] of lag) {
        const before = previousLag.get(peer) ?? { sum: 0, count: 0 };
        // No new observation (nothing changed at the peer): the last measured lag still stands.
        if (count > before.count) lastLagMs.set(peer, ((sum - before.sum) / (count - before.count)) * 1000);
      }
      previousLag = lag;

      const state = valueFor(metrics.get(BREAKER_STATE), region);
      const transitions = [...(metrics.get(BREAKER_TRANSITIONS)?.values ?? [])]
        .filter((entry) => entry.labels.region === undefined || entry.labels.region === region)
        .reduce((total, entry) => total + entry.value, 0);
      return {
        endpoints,
        breaker: { state: state === undefined ? 'unknown' : state >= 1 ? 'open' : 'closed', transitions },
        syncLagMs: new Map(lastLagMs),
        falseDenials: sumBy(metrics.get(FALSE_DENIALS), 'rule', region),
        stranded: sumBy(metrics.get(STRANDED), 'rule', region),
      };
    },
  };
}

// The top-N gauges of the limited keys. They are filled at scrape time from the engines' sketches (no cost per
// decision), after a reset, so a key that left a rule's top N loses its series at the next scrape: at most
// `topKeys.metricsTopN` series per rule and gauge, whatever the traffic.
import { Gauge } from 'prom-client';
import type { Rule } from '../config/schema.ts';
import { registry } from '../metrics.ts';
import type { TopKeys, TopKeysMeasure } from './top-keys.ts';

/** An engine's sketches and the rules in force (they follow a reload). */
export interface TopKeysSource {
  topKeys: TopKeys;
  rules: () => readonly Rule[];
}

const sources = new Set<TopKeysSource>();

function fill(gauge: Gauge<'rule' | 'key'>, by: TopKeysMeasure): void {
  gauge.reset();
  const now = Date.now();
  for (const { topKeys, rules } of sources) {
    const n = topKeys.settings.metricsTopN;
    if (n === 0) continue;
    for (const rule of rules()) {
      for (const entry of topKeys.top(rule, by, n, 'current', now).entries) gauge.set({ rule: rule.name, key: entry.key }, entry.count);
    }
  }
}

export const topKeyDenials: Gauge<'rule' | 'key'> = new Gauge({
  name: 'quotafed_top_key_denials',
  help:
    "Denials in the rule's current window of the keys this process denied most (space-saving sketch, an upper bound; " +
    'at most topKeys.metricsTopN keys per rule; API keys masked unless topKeys.apiKeys is plain).',
  labelNames: ['rule', 'key'] as const,
  registers: [registry],
  collect() {
    fill(this, 'denials');
  },
});

export const topKeyConsumption: Gauge<'rule' | 'key'> = new Gauge({
  name: 'quotafed_top_key_consumption',
  help:
    "Admitted cost in the rule's current window of the keys this process admitted most (space-saving sketch, an " +
    'upper bound; at most topKeys.metricsTopN keys per rule).',
  labelNames: ['rule', 'key'] as const,
  registers: [registry],
  collect() {
    fill(this, 'consumption');
  },
});

/**
 * Exports an engine's sketches on the top-N gauges until the returned function is called.
 *
 * @example
 * ```ts
 * const unexpose = exposeTopKeys({ topKeys, rules: () => current.config.rules });
 * // at close:
 * unexpose();
 * ```
 */
export function exposeTopKeys(source: TopKeysSource): () => void {
  sources.add(source);
  return () => {
    sources.delete(source);
  };
}

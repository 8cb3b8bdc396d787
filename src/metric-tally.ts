// Counts kept in plain numbers on the decision path and handed to their prom-client counter when it is read.
//
// prom-client's `inc` validates the labels and joins them into a text key on every call (about 0.34 µs a call on the
// bench machine, docs/performance.md); a decision counts once or twice. A tally finds its count through one Map per
// label instead (a label value is mostly the same string object from call to call) and adds what it holds to the
// counter in the counter's `collect` hook, which prom-client runs before every read of the counter (a scrape of
// /metrics, `registry.metrics()`, `counter.get()`): what a read shows is every increment made before it.
import type { Counter } from 'prom-client';

interface Leaf<L extends string> {
  labels: Record<L, string>;
  value: number;
}

/** Increments by label values, handed on to a counter when it is read. */
export interface Tally<L extends string> {
  /** Adds `value` (1 by default) to the count of these label values. */
  add(labels: Record<L, string>, value?: number): void;
  /** Adds every count held to `counter` and starts again from zero (the counter's collect hook calls it). */
  drainInto(counter: Counter<L>): void;
}

/**
 * A tally for a counter with these label names, in the order its counts are looked up.
 *
 * @example
 * ```ts
 * const tally = createTally(['rule'] as const);
 * const counter = new Counter({ name: 'x_total', help: 'x', labelNames: ['rule'], collect() { tally.drainInto(this) } });
 * tally.add({ rule: 'per-key' });
 * await counter.get(); // { values: [{ labels: { rule: 'per-key' }, value: 1 }], ... }
 * ```
 */
export function createTally<L extends string>(labelNames: readonly L[]): Tally<L> {
  const depth = labelNames.length;
  if (depth === 0) throw new Error('createTally: a tally needs at least one label name');
  // Nested Maps, one level per label; the last level holds the leaves.
  const root = new Map<string, unknown>();
  const leaves: Leaf<L>[] = [];
  return {
    add(labels, value = 1) {
      let level = root;
      for (let i = 0; i < depth - 1; i++) {
        const key = labels[labelNames[i]!];
        let next = level.get(key) as Map<string, unknown> | undefined;
        if (next === undefined) {
          next = new Map();
          level.set(key, next);
        }
        level = next;
      }
      const last = labels[labelNames[depth - 1]!];
      let leaf = level.get(last) as Leaf<L> | undefined;
      if (leaf === undefined) {
        leaf = { labels: { ...labels }, value: 0 };
        level.set(last, leaf);
        leaves.push(leaf);
      }
      leaf.value += value;
    },
    drainInto(counter) {
      for (const leaf of leaves) {
        if (leaf.value === 0) continue;
        counter.inc(leaf.labels, leaf.value);
        leaf.value = 0;
      }
    },
  };
}

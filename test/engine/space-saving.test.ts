// The space-saving guarantees (Metwally et al. 2005) on random weighted streams, checked against exact counts:
// every key counted above N / capacity is held, each held count is an upper bound whose error is bounded, a key
// that is not held was counted at most the sketch's floor, and memory stays at the capacity.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SpaceSaving } from '../../src/engine/space-saving.ts';

/** A skewed stream: key i drawn about as often as 1 / (i + 1), whole weights 1-3 (or 1 only). */
const streamOf = (keys: number, length: number, unit: boolean) =>
  fc.array(
    fc.tuple(
      fc.integer({ min: 0, max: keys * keys - 1 }).map((x) => Math.floor(Math.sqrt(x))),
      unit ? fc.constant(1) : fc.integer({ min: 1, max: 3 }),
    ),
    { minLength: 1, maxLength: length },
  );

function checkGuarantees(capacity: number, stream: readonly (readonly [number, number])[]): void {
  const sketch = new SpaceSaving<string>(capacity);
  const exact = new Map<string, number>();
  for (const [key, weight] of stream) {
    const id = `k${key}`;
    exact.set(id, (exact.get(id) ?? 0) + weight);
    const hit = sketch.add(id, weight)!;
    if (hit.meta === undefined) hit.meta = `label-${id}`;
    expect(hit.meta).toBe(`label-${id}`);
  }
  const total = stream.reduce((sum, [, weight]) => sum + weight, 0);
  expect(sketch.total).toBe(total);
  expect(sketch.size).toBe(Math.min(capacity, exact.size));
  const held = sketch.top(capacity);
  expect(held).toHaveLength(sketch.size);
  // The counts sum to N, in descending order.
  expect(held.reduce((sum, entry) => sum + entry.count, 0)).toBe(total);
  for (let i = 1; i < held.length; i++) expect(held[i]!.count).toBeLessThanOrEqual(held[i - 1]!.count);
  const floor = sketch.floor;
  expect(floor).toBeLessThanOrEqual(total / capacity);
  const heldIds = new Set(held.map((entry) => entry.id));
  for (const entry of held) {
    const truth = exact.get(entry.id)!;
    expect(entry.count).toBeGreaterThanOrEqual(truth);
    expect(entry.count - entry.error).toBeLessThanOrEqual(truth);
    expect(entry.error).toBeLessThanOrEqual(floor);
  }
  for (const [id, truth] of exact) {
    if (truth > total / capacity) expect(heldIds.has(id), `${id} counted ${truth} of ${total}`).toBe(true);
    if (!heldIds.has(id)) expect(truth).toBeLessThanOrEqual(floor);
  }
}

describe('SpaceSaving', () => {
  it('holds every key above N / capacity, with bounded errors, on unit-weight streams', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 24 }), streamOf(80, 600, true), (capacity, stream) => checkGuarantees(capacity, stream)),
      { numRuns: 200 },
    );
  });

  it('keeps the guarantees with weighted adds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 24 }), streamOf(80, 600, false), (capacity, stream) => checkGuarantees(capacity, stream)),
      { numRuns: 200 },
    );
  });

  it('counts exactly while it holds every key, and ignores non-positive weights', () => {
    const sketch = new SpaceSaving(4);
    sketch.add('a', 5);
    sketch.add('b');
    sketch.add('a', 2.5);
    expect(sketch.add('c', 0)).toBeUndefined();
    expect(sketch.add('c', -1)).toBeUndefined();
    expect(sketch.add('c', Number.NaN)).toBeUndefined();
    expect(sketch.top(10)).toEqual([
      { id: 'a', count: 7.5, error: 0, meta: undefined },
      { id: 'b', count: 1, error: 0, meta: undefined },
    ]);
    expect(sketch.floor).toBe(0);
    expect(sketch.total).toBe(8.5);
  });

  it('replaces the smallest counter and carries its count as the error', () => {
    const sketch = new SpaceSaving<string>(2);
    sketch.add('a', 3);
    sketch.add('b', 1);
    const c = sketch.add('c', 1)!;
    expect(c).toMatchObject({ id: 'c', count: 2, error: 1, meta: undefined });
    expect(sketch.get('b')).toBeUndefined();
    expect(sketch.floor).toBe(2);
    sketch.clear();
    expect(sketch.top(5)).toEqual([]);
    expect(sketch.total).toBe(0);
  });

  it('stays at its capacity over a million distinct keys, in O(1) per unit add', () => {
    const sketch = new SpaceSaving(256);
    const started = performance.now();
    for (let i = 0; i < 1_000_000; i++) sketch.add(`fresh-${i}`, 1);
    for (let i = 0; i < 50_000; i++) sketch.add('hot', 1);
    const elapsedMs = performance.now() - started;
    expect(sketch.size).toBe(256);
    expect(sketch.top(1)[0]).toMatchObject({ id: 'hot' });
    // 1.05 M adds: a structure slower than O(1) per add (a scan of 256 counters each) would take seconds.
    expect(elapsedMs).toBeLessThan(3_000);
  });

  it('rejects a capacity that is not a positive integer', () => {
    expect(() => new SpaceSaving(0)).toThrow(RangeError);
    expect(() => new SpaceSaving(2.5)).toThrow(RangeError);
  });
});

// Space-saving heavy hitters (Metwally, Agrawal and El Abbadi, "Efficient Computation of Frequent and Top-k
// Elements in Data Streams", ICDT 2005) on their Stream-Summary structure: counters grouped in buckets of equal
// count, buckets in a doubly linked list by ascending count. A unit increment moves a counter to the next bucket,
// so it costs O(1); a weight w walks past at most the buckets between count and count + w (at most w for whole
// weights, and never more than the capacity). Memory: `capacity` counters and at most as many buckets.
//
// For a stream of total weight N and capacity m, with min the smallest held count (0 while the sketch is not full):
//   - every held item's true count lies in [count - error, count], and error <= min <= N / m;
//   - an item that is not held has a true count of at most min, so every item with a true count above N / m is held;
//   - the counts sum to N.

/** One held item: its count is an upper bound of its true count, count - error a lower bound. */
export interface HeavyHitter<M> {
  readonly id: string;
  readonly count: number;
  /** How much of `count` may belong to the items this one replaced (0 for an item held since its first add). */
  readonly error: number;
  /** The caller's data for this item (a display label); undefined when the item was just (re)placed. */
  meta: M | undefined;
}

interface Bucket<M> {
  count: number;
  /** The bucket's counters, a doubly linked list (never empty while the bucket is in the list). */
  first: Counter<M> | undefined;
  /** Next lower and higher count. */
  lower: Bucket<M> | undefined;
  higher: Bucket<M> | undefined;
}

interface Counter<M> {
  id: string;
  count: number;
  error: number;
  meta: M | undefined;
  bucket: Bucket<M>;
  prev: Counter<M> | undefined;
  next: Counter<M> | undefined;
}

/**
 * A bounded summary of the heaviest items of a weighted stream (space-saving). Pure and synchronous.
 *
 * @example
 * ```ts
 * const sketch = new SpaceSaving<string>(100);
 * const hit = sketch.add('api-key-42', 1);
 * if (hit && hit.meta === undefined) hit.meta = 'api-…'; // set once when the item enters the sketch
 * sketch.top(10); // [{ id: 'api-key-42', count: 1, error: 0, meta: 'api-…' }]
 * ```
 */
export class SpaceSaving<M = undefined> {
  readonly capacity: number;
  readonly #counters = new Map<string, Counter<M>>();
  #lowest: Bucket<M> | undefined;
  #highest: Bucket<M> | undefined;
  #total = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
  }

  /** Total weight added since the last clear (N). */
  get total(): number {
    return this.#total;
  }

  /** Items held. */
  get size(): number {
    return this.#counters.size;
  }

  /** The most an item that is not held can have been counted: the smallest held count once full, else 0. */
  get floor(): number {
    return this.#counters.size < this.capacity ? 0 : (this.#lowest?.count ?? 0);
  }

  /**
   * Counts `weight` (> 0, finite) for `id` and returns its entry; a non-positive or non-finite weight counts
   * nothing and returns undefined. A new item takes a free counter, or the smallest one (inheriting its count as
   * error); its `meta` is then undefined for the caller to set.
   */
  add(id: string, weight = 1): HeavyHitter<M> | undefined {
    if (!(weight > 0) || weight === Number.POSITIVE_INFINITY) return undefined;
    this.#total += weight;
    const held = this.#counters.get(id);
    if (held !== undefined) {
      this.#move(held, held.count + weight);
      return held;
    }
    const lowest = this.#lowest;
    if (this.#counters.size >= this.capacity && lowest !== undefined) {
      // Replace the newest counter of the lowest bucket: it takes over the count as its error.
      const victim = lowest.first!;
      this.#counters.delete(victim.id);
      victim.id = id;
      victim.error = victim.count;
      victim.meta = undefined;
      this.#counters.set(id, victim);
      this.#move(victim, victim.count + weight);
      return victim;
    }
    const counter: Counter<M> = {
      id,
      count: weight,
      error: 0,
      meta: undefined,
      bucket: undefined as never,
      prev: undefined,
      next: undefined,
    };
    this.#counters.set(id, counter);
    if (lowest === undefined || lowest.count > weight) {
      const bucket = this.#insertBucket(weight, undefined);
      this.#attach(counter, bucket);
    } else {
      this.#attach(counter, this.#bucketAtOrAbove(lowest, weight));
    }
    return counter;
  }

  /** The held entry of `id`, if any. */
  get(id: string): HeavyHitter<M> | undefined {
    return this.#counters.get(id);
  }

  /** Up to `n` held items, highest count first (copies). */
  top(n: number): HeavyHitter<M>[] {
    const result: HeavyHitter<M>[] = [];
    for (let bucket = this.#highest; bucket !== undefined && result.length < n; bucket = bucket.lower) {
      for (let counter = bucket.first; counter !== undefined && result.length < n; counter = counter.next) {
        result.push({ id: counter.id, count: counter.count, error: counter.error, meta: counter.meta });
      }
    }
    return result;
  }

  /** Forgets every item (the counters are dropped; the capacity stays). */
  clear(): void {
    this.#counters.clear();
    this.#lowest = undefined;
    this.#highest = undefined;
    this.#total = 0;
  }

  /** Moves `counter` to the bucket of `count` (> its current count), creating it, and drops a bucket left empty. */
  #move(counter: Counter<M>, count: number): void {
    const from = counter.bucket;
    const target = this.#bucketAtOrAbove(from, count);
    this.#detach(counter);
    counter.count = count;
    this.#attach(counter, target);
    if (from.first === undefined) this.#removeBucket(from);
  }

  /** The bucket of exactly `count`, searching upward from `start` (whose count is <= count); created if missing. */
  #bucketAtOrAbove(start: Bucket<M>, count: number): Bucket<M> {
    let below = start;
    while (below.higher !== undefined && below.higher.count <= count) below = below.higher;
    return below.count === count ? below : this.#insertBucket(count, below);
  }

  /** A new empty bucket just above `below` (or as the lowest when undefined). */
  #insertBucket(count: number, below: Bucket<M> | undefined): Bucket<M> {
    const higher = below === undefined ? this.#lowest : below.higher;
    const bucket: Bucket<M> = { count, first: undefined, lower: below, higher };
    if (below === undefined) this.#lowest = bucket;
    else below.higher = bucket;
    if (higher === undefined) this.#highest = bucket;
    else higher.lower = bucket;
    return bucket;
  }

  #removeBucket(bucket: Bucket<M>): void {
    if (bucket.lower === undefined) this.#lowest = bucket.higher;
    else bucket.lower.higher = bucket.higher;
    if (bucket.higher === undefined) this.#highest = bucket.lower;
    else bucket.higher.lower = bucket.lower;
  }

  #attach(counter: Counter<M>, bucket: Bucket<M>): void {
    counter.bucket = bucket;
    counter.prev = undefined;
    counter.next = bucket.first;
    if (bucket.first !== undefined) bucket.first.prev = counter;
    bucket.first = counter;
  }

  #detach(counter: Counter<M>): void {
    if (counter.prev === undefined) counter.bucket.first = counter.next;
    else counter.prev.next = counter.next;
    if (counter.next !== undefined) counter.next.prev = counter.prev;
    counter.prev = undefined;
    counter.next = undefined;
  }
}

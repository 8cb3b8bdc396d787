// Which API key the next request carries: uniform over K keys, or Zipf(s) over a key space (rank 1 the most
// frequent), from a seeded generator so two runs of a case send the same key sequence.

export type KeyDistribution = 'uniform' | 'zipf';

export interface KeyDrawOptions {
  distribution: KeyDistribution;
  /** Uniform: the number of keys; Zipf: the size of the key space. */
  keys: number;
  /** Zipf exponent (1.0 unless told). */
  exponent?: number;
  seed?: number;
}

/** mulberry32: a small, fast, seeded generator of floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * A function returning the index (0-based) of the next key. Zipf draws by binary search over the cumulative
 * weights 1/rank^s (8 bytes per key of the space: 8 MB for a million keys).
 */
export function keyDraw(options: KeyDrawOptions): () => number {
  const random = seededRandom(options.seed ?? 1);
  const { keys } = options;
  if (options.distribution === 'uniform') return () => Math.floor(random() * keys);
  const exponent = options.exponent ?? 1;
  const cumulative = new Float64Array(keys);
  let total = 0;
  for (let rank = 1; rank <= keys; rank++) {
    total += rank ** -exponent;
    cumulative[rank - 1] = total;
  }
  return () => {
    const target = random() * total;
    let low = 0;
    let high = keys - 1;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (cumulative[mid]! < target) low = mid + 1;
      else high = mid;
    }
    return low;
  };
}

// Traffic: Poisson arrivals per stream and the region each request lands in.
import type { TrafficShape, TrafficStream } from './types.ts';

/** The next arrival of a stream after `after` (exact, fractional ms), or none past its end. */
export function nextArrival(
  spec: TrafficStream,
  after: number,
  durationMs: number,
  random: () => number,
): { at: number; exact: number } | undefined {
  if (spec.ratePerSec <= 0) return undefined;
  const gap = (-Math.log(1 - random()) * 1000) / spec.ratePerSec;
  // The next gap counts from the exact (fractional) time, so rates above 1,000/s keep their count.
  const exact = after + gap;
  const at = Math.round(exact);
  if (at > (spec.endMs ?? durationMs)) return undefined;
  return { at, exact };
}

/** The index (into the sorted region names) of the region a request lands in at true time `now`. */
export function pickRegion(shape: TrafficShape, names: string[], now: number, random: () => number): number {
  const n = names.length;
  switch (shape.kind) {
    case 'even':
      return Math.min(n - 1, Math.floor(random() * n));
    case 'region':
      return Math.max(0, names.indexOf(shape.region));
    case 'shifting':
      return Math.floor(now / shape.everyMs) % n;
    case 'weighted': {
      const total = shape.weights.reduce((a, b) => a + b, 0);
      let pick = random() * total;
      for (let i = 0; i < n; i++) {
        pick -= shape.weights[i] ?? 0;
        if (pick < 0) return i;
      }
      return n - 1;
    }
  }
}

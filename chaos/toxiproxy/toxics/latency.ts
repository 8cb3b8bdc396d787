// Delays each chunk to (read time + latency ± jitter). Delays are measured from the read time, so chunks in
// flight overlap and throughput is unchanged, as in Go.
import { performance } from 'node:perf_hooks';
import type { ToxicKind } from './types.ts';

function delayMs(latency: number, jitter: number): number {
  if (jitter <= 0) return latency;
  // A uniform integer in [-jitter, +jitter), like Go's rand.Int63n(2*jitter) - jitter.
  return latency + Math.floor(Math.random() * 2 * jitter) - jitter;
}

export const latency: ToxicKind = {
  attributes: ['latency', 'jitter'],
  bufferSize: 1024,
  createRunner: ({ latency = 0, jitter = 0 }) => ({
    async data(chunk, ctx) {
      const wait = delayMs(latency, jitter) - (performance.now() - chunk.readAt);
      // Interrupted or not, the chunk goes on: an update or removal must never drop data.
      if (wait > 0) await ctx.sleep(wait);
      // The next latency toxic in the chain counts from here, so two toxics add up.
      await ctx.emit({ data: chunk.data, readAt: Math.max(chunk.readAt, performance.now()) });
    },
    end(ctx) {
      ctx.end();
      return true;
    },
  }),
};

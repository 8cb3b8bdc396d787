// Cuts each chunk into pieces of about `average_size` ± `size_variation` bytes, `delay` microseconds apart.
import type { ToxicKind } from './types.ts';

/** Piece boundaries of [start, end) by recursive halving, as Go's SlicerToxic.chunk does. */
export function sliceBoundaries(start: number, end: number, averageSize: number, sizeVariation: number): number[] {
  const size = end - start;
  // Go recurses forever on 1-byte spans when average and variation are both 0; a byte cannot be cut anyway.
  if (size - averageSize <= sizeVariation || size <= 1) return [start, end];
  let mid = start + Math.floor(size / 2);
  if (sizeVariation > 0) mid += Math.floor(Math.random() * 2 * sizeVariation) - sizeVariation;
  mid = Math.min(end - 1, Math.max(start + 1, mid));
  const left = sliceBoundaries(start, mid, averageSize, sizeVariation);
  const right = sliceBoundaries(mid, end, averageSize, sizeVariation);
  return [...left, ...right.slice(1)];
}

export const slicer: ToxicKind = {
  attributes: ['average_size', 'size_variation', 'delay'],
  bufferSize: 1,
  createRunner: ({ average_size = 0, size_variation = 0, delay = 0 }) => ({
    async data(chunk, ctx) {
      const bounds = sliceBoundaries(0, chunk.data.length, average_size, size_variation);
      for (let i = 1; i < bounds.length; i++) {
        await ctx.emit({ data: chunk.data.subarray(bounds[i - 1], bounds[i]), readAt: chunk.readAt });
        if (i === bounds.length - 1 || delay <= 0) continue;
        if (!(await ctx.sleep(delay / 1000))) {
          await ctx.emit({ data: chunk.data.subarray(bounds[i]), readAt: chunk.readAt });
          return;
        }
      }
    },
    end(ctx) {
      ctx.end();
      return true;
    },
  }),
};

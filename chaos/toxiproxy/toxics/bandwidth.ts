// Limits the rate to `rate` KB/s (1 KB = 1000 bytes). Big chunks go out as rate×100-byte pieces every 100 ms;
// timer error carries over into the next sleep, as in Go.
import { performance } from 'node:perf_hooks';
import type { ToxicKind } from './types.ts';

export const bandwidth: ToxicKind = {
  attributes: ['rate'],
  bufferSize: 1,
  createRunner: ({ rate = 0 }) => {
    let budgetMs = 0;
    return {
      async data(chunk, ctx) {
        // Go's loop never sends anything when rate ≤ 0, so the stream stalls until the toxic changes.
        if (rate <= 0) {
          await ctx.sleep(Infinity);
          await ctx.emit(chunk);
          return;
        }
        let data = chunk.data;
        budgetMs += data.length / rate;
        const piece = rate * 100;
        while (data.length > piece) {
          if (!(await ctx.sleep(100))) {
            await ctx.emit({ data, readAt: chunk.readAt });
            return;
          }
          await ctx.emit({ data: data.subarray(0, piece), readAt: chunk.readAt });
          data = data.subarray(piece);
          budgetMs -= 100;
        }
        const started = performance.now();
        await ctx.sleep(budgetMs);
        budgetMs -= performance.now() - started;
        await ctx.emit({ data, readAt: chunk.readAt });
      },
      end(ctx) {
        ctx.end();
        return true;
      },
    };
  },
};

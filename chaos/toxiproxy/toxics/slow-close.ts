// Passes data through and holds the close for `delay` ms after the source's EOF.
import type { ToxicKind } from './types.ts';

export const slowClose: ToxicKind = {
  attributes: ['delay'],
  bufferSize: 1,
  createRunner: ({ delay = 0 }) => ({
    data: (chunk, ctx) => ctx.emit(chunk),
    async end(ctx) {
      // An interrupt ends the wait without closing; the updated toxic (or, after removal, the chain) closes.
      if (!(await ctx.sleep(delay))) return false;
      ctx.end();
      return true;
    },
  }),
};

// Forwards at most `bytes` bytes per connection in its direction, then closes the connection. The counter
// lives in the per-connection state so that updates keep it.
import type { ToxicKind } from './types.ts';

export const limitData: ToxicKind = {
  attributes: ['bytes'],
  bufferSize: 1,
  createRunner: ({ bytes = 0 }) => ({
    async data(chunk, ctx) {
      const sent = ctx.state.sent ?? 0;
      const allowed = Math.max(0, bytes - sent);
      const data = allowed < chunk.data.length ? chunk.data.subarray(0, allowed) : chunk.data;
      if (data.length > 0) {
        ctx.state.sent = sent + data.length;
        await ctx.emit({ data, readAt: chunk.readAt });
      }
      if (bytes - (ctx.state.sent ?? 0) <= 0) ctx.end();
    },
    end(ctx) {
      ctx.end();
      return true;
    },
  }),
};

// On the first chunk (or EOF) in its direction: drop it, wait `timeout` ms, then reset both sockets (TCP RST).
import type { StageContext, ToxicKind } from './types.ts';

export const resetPeer: ToxicKind = {
  attributes: ['timeout'],
  bufferSize: 1,
  createRunner: ({ timeout: timeoutMs = 0 }) => {
    // Go's wait cannot be interrupted: once triggered, the reset happens even if the toxic changes meanwhile.
    const reset = async (ctx: StageContext) => {
      await ctx.sleep(timeoutMs, { interruptible: false });
      ctx.end({ reset: true });
    };
    return {
      data: (_chunk, ctx) => reset(ctx),
      end: async (ctx) => {
        await reset(ctx);
        return true;
      },
    };
  },
};

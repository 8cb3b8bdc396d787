// Drops every chunk in its direction. With timeout > 0 the connection closes after `timeout` ms without a
// chunk (counted from the toxic's start or the last dropped chunk); 0 means drop forever. Removing the toxic
// closes the connection.
import type { StageContext, ToxicKind } from './types.ts';

export const timeout: ToxicKind = {
  attributes: ['timeout'],
  bufferSize: 1,
  closesOnRemove: true,
  createRunner: ({ timeout: timeoutMs = 0 }) => {
    let timer: NodeJS.Timeout | undefined;
    const arm = (ctx: StageContext) => {
      if (timer) clearTimeout(timer);
      if (timeoutMs > 0) timer = setTimeout(() => ctx.end(), timeoutMs);
    };
    return {
      start: arm,
      data: (_chunk, ctx) => arm(ctx),
      end(ctx) {
        ctx.end();
        return true;
      },
      stop() {
        if (timer) clearTimeout(timer);
        timer = undefined;
      },
    };
  },
};

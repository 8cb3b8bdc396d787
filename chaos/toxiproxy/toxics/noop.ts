// Pass-through: the `noop` type, and what a toxic does on connections its toxicity did not pick.
import type { ToxicKind, ToxicRunner } from './types.ts';

export function passThrough(): ToxicRunner {
  return {
    data: (chunk, ctx) => ctx.emit(chunk),
    end: (ctx) => {
      ctx.end();
      return true;
    },
  };
}

export const noop: ToxicKind = {
  attributes: [],
  bufferSize: 1,
  createRunner: passThrough,
};

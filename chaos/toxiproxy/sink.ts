// What flows through a link, and the push interface every step of it (toxic stage or destination) offers.
import type { Chunk } from './toxics/types.ts';

export type Item = ({ kind: 'data' } & Chunk) | { kind: 'end'; reset: boolean };

export interface Sink {
  /** Never blocks: callers respect `hasRoom` for backpressure; flushes on interrupt may overfill briefly. */
  push(item: Item): void;
  hasRoom(): boolean;
  /** Resolves once `hasRoom` may be true again (or the sink went away). */
  waitRoom(): Promise<void>;
}

/** A one-shot set of waiters, released together. */
export function waiters(): { wait(): Promise<void>; release(): void } {
  let pending: Array<() => void> = [];
  return {
    wait: () => new Promise<void>((resolve) => pending.push(resolve)),
    release() {
      const current = pending;
      pending = [];
      for (const resolve of current) resolve();
    },
  };
}

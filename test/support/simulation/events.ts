// The event queue: virtual-time events in a binary min-heap.
import type { Fault, Message } from './types.ts';

export type Event =
  | { kind: 'arrival'; stream: number; exact: number }
  | { kind: 'tick'; region: number }
  | { kind: 'deliver'; message: Message; duplicate: boolean }
  | { kind: 'ack'; message: Message }
  | { kind: 'fault'; fault: Fault }
  | { kind: 'probe'; probe: number }
  | { kind: 'fast'; region: number; key: string }
  | { kind: 'park'; region: number; stream: number; cost: number; until: number; attempt: number };

export interface Scheduled {
  at: number;
  seq: number;
  event: Event;
}

/** Binary min-heap on (at, seq): ties resolve in scheduling order, so runs are deterministic. */
export class EventQueue {
  private heap: Scheduled[] = [];
  private seq = 0;
  /** Virtual time never runs backwards: nothing is scheduled before the event being handled. */
  floor = 0;

  push(at: number, event: Event): void {
    const item = { at: Math.max(at, this.floor), seq: this.seq++, event };
    const heap = this.heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  pop(): Scheduled | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && before(heap[left]!, heap[smallest]!)) smallest = left;
        if (right < heap.length && before(heap[right]!, heap[smallest]!)) smallest = right;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
        i = smallest;
      }
    }
    return top;
  }
}

function before(a: Scheduled, b: Scheduled): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

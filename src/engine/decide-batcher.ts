// A micro-batcher for decide calls on one connection. Decisions that arrive in one turn of the event loop go
// together at its end (setImmediate: after the turn's I/O callbacks, so the requests that one poll of the sockets
// brought in share a call); one that finds a call of its queue in flight waits, and the decisions that arrived
// meanwhile go together in the next call. A call of one decision goes alone (no batch framing); several go as one
// FCALL that decides them in arrival order (lua/includes/decide_batch.lua). Under load this spreads ioredis's and
// Redis's per-call cost over the batch, and the batch grows with the load by itself; a lone decision waits only for
// the end of its turn. (Sending the first decision of a turn at once, as this did before, made a burst pay two round
// trips: the first alone, the rest after it; docs/performance.md, "the decisions of one turn go together".) Each
// decision's result is exactly what it would have been sent alone: Redis runs the batch atomically, one decision
// after the other, in the order they arrived.
//
// On Redis Cluster every key of one call must hash to one slot, so each shard has its own queue.
import type { DecideCaller } from '../store/decide-caller.ts';

type Call = readonly (string | number)[];

interface Pending {
  call: Call;
  resolve: (reply: unknown) => void;
  reject: (error: unknown) => void;
}

interface Queue {
  inFlight: number;
  waiting: Pending[];
  /** A drain is scheduled for the end of this event-loop turn (setImmediate). */
  scheduled: boolean;
}

export interface DecideBatcher {
  /** Decide `call` (numkeys, keys, arguments) on the queue `lane` (0 unless calls must not share a call). */
  submit(call: Call, lane: number): Promise<unknown>;
}

export interface DecideBatcherOptions {
  /** Most decisions in one call (bounds the call's size and the time Redis spends in it). */
  maxBatch?: number;
  /** Calls of one queue in flight at once (1: strictly one after the other). */
  maxInFlight?: number;
}

export function createDecideBatcher(caller: DecideCaller, options: DecideBatcherOptions = {}): DecideBatcher {
  const maxBatch = options.maxBatch ?? 128;
  const maxInFlight = options.maxInFlight ?? 1;
  const queues = new Map<number, Queue>();

  const send = (queue: Queue, batch: Pending[]): void => {
    queue.inFlight++;
    const done = () => {
      queue.inFlight--;
      drain(queue);
    };
    if (batch.length === 1) {
      const only = batch[0]!;
      caller(only.call).then(
        (reply) => {
          only.resolve(reply);
          done();
        },
        (error: unknown) => {
          only.reject(error);
          done();
        },
      );
      return;
    }
    caller.batch(batch.map((pending) => pending.call)).then(
      (replies) => {
        for (let i = 0; i < batch.length; i++) {
          const reply = replies[i];
          if (reply instanceof Error) batch[i]!.reject(reply);
          else if (reply === undefined)
            batch[i]!.reject(new Error(`decide batch answered ${replies.length} replies for ${batch.length} calls`));
          else batch[i]!.resolve(reply);
        }
        done();
      },
      (error: unknown) => {
        for (const pending of batch) pending.reject(error);
        done();
      },
    );
  };

  const drain = (queue: Queue): void => {
    while (queue.waiting.length > 0 && queue.inFlight < maxInFlight) {
      send(queue, queue.waiting.length <= maxBatch ? queue.waiting.splice(0) : queue.waiting.splice(0, maxBatch));
    }
  };

  return {
    submit(call, lane) {
      let queue = queues.get(lane);
      if (!queue) {
        queue = { inFlight: 0, waiting: [], scheduled: false };
        queues.set(lane, queue);
      }
      const target = queue;
      return new Promise((resolve, reject) => {
        target.waiting.push({ call, resolve, reject });
        if (target.inFlight < maxInFlight && !target.scheduled) {
          target.scheduled = true;
          setImmediate(() => {
            target.scheduled = false;
            drain(target);
          });
        }
      });
    },
  };
}

// A micro-batcher for decide calls on one connection. Decisions that arrive in one turn of the event loop go
// together at its end (setImmediate: after the turn's I/O callbacks, so the requests that one poll of the sockets
// brought in share a call). A call of one decision goes alone (no batch framing); several go as one FCALL that
// decides them in arrival order (lua/includes/decide_batch.lua). Under load this spreads ioredis's and Redis's
// per-call cost over the batch, and the batch grows with the load by itself; a lone decision waits only for the end
// of its turn. (Sending the first decision of a turn at once, as this did before, made a burst pay two round trips:
// the first alone, the rest after it; docs/performance.md, "the decisions of one turn go together".)
//
// Two calls of a queue may be in flight. A queue with nothing in flight and at least 2 x `pipelineAt` decisions
// waiting sends them as two calls, back to back; with one call in flight, the decisions that gather meanwhile go
// once there are `pipelineAt` of them, else after its answer. So Redis decides one half while this process answers
// the other (with one call at a time, a closed group of callers left the two in lock step: Redis idle while the
// process handled an answer, the process idle while Redis decided; docs/performance.md, "two calls in flight").
// Each decision's result is exactly what it would have been sent alone: Redis runs each call atomically, one
// decision after the other, and a connection's calls in the order they were sent, so decisions stay in arrival
// order. (One exception: a call retried after Redis lost the library, functions-mode.ts, goes after the other call in
// flight; their decisions were concurrent, so either order is one a single limiter could have taken.)
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
  /** Calls of one queue in flight at once (1: strictly one after the other; default 2). */
  maxInFlight?: number;
  /**
   * Decisions that go as a further call while one is in flight (default 16); a queue with nothing in flight splits
   * twice this many or more into two calls.
   */
  pipelineAt?: number;
}

export function createDecideBatcher(caller: DecideCaller, options: DecideBatcherOptions = {}): DecideBatcher {
  const maxBatch = options.maxBatch ?? 128;
  const maxInFlight = options.maxInFlight ?? 2;
  const pipelineAt = options.pipelineAt ?? 16;
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

  /** Whether `queue` sends a call now: nothing in flight, or room for another and enough gathered for it. */
  const ready = (queue: Queue): boolean =>
    queue.waiting.length > 0 && (queue.inFlight === 0 || (queue.inFlight < maxInFlight && queue.waiting.length >= pipelineAt));

  const drain = (queue: Queue): void => {
    while (ready(queue)) {
      const waiting = queue.waiting.length;
      // Idle with enough for two calls and room for both: half now, the rest at once as the second.
      const split = queue.inFlight === 0 && maxInFlight > 1 && waiting >= 2 * pipelineAt;
      const size = Math.min(split ? Math.ceil(waiting / 2) : waiting, maxBatch);
      send(queue, size === waiting ? queue.waiting.splice(0) : queue.waiting.splice(0, size));
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
        if (!target.scheduled && ready(target)) {
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

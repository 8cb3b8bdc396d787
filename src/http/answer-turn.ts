// When an HTTP answer is written. A decision made without a Redis round trip (the over-limit cache, a local lease, a
// list, no rule matched, the fail modes while the breaker is open) is ready in the same turn of the event loop as
// the socket read that brought its request. Written there, every request is read, decided and answered on its own
// before the next socket is read; a hot key denied from the cache cost about twice the server CPU per request of a
// key Redis decided, and half the requests per second (docs/performance.md, "Answers ready at once"). Such an answer
// waits for the loop's check phase (setImmediate): the requests read in one turn are answered together after it, as
// Redis's replies already are. A decision Redis made is answered at once.
import type { Decision } from '../engine/types.ts';

/** True when no rule's verdict came from Redis in this request (the answer was ready without waiting on I/O). */
export function decidedInProcess(decision: Pick<Decision, 'outcomes'>): boolean {
  for (const outcome of decision.outcomes) if (outcome.source === 'redis') return false;
  return true;
}

/** The answers waiting for the check phase, in arrival order: one setImmediate for all of them, not one each. */
let waiting: (() => void)[] = [];

function answerWaiting(): void {
  const ready = waiting;
  waiting = [];
  for (const resolve of ready) resolve();
}

/**
 * Resolves at once for a decision Redis made, else at the event loop's next check phase (setImmediate).
 *
 * @example
 * ```ts
 * const decision = await engine.decide(request);
 * await answerTurn(decision);
 * return c.json({ allowed: decision.allowed });
 * ```
 */
export function answerTurn(decision: Pick<Decision, 'outcomes'>): Promise<void> | undefined {
  if (!decidedInProcess(decision)) return undefined;
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (waiting.length === 1) setImmediate(answerWaiting);
  });
}

// An answer decided in process (cache, lease, list, fail modes, no rule) waits for the event loop's check phase; one
// Redis decided is written at once (src/http/answer-turn.ts; why: docs/performance.md "Answers ready at once").
import { describe, expect, it } from 'vitest';
import type { DecisionSource, RuleOutcome } from '../../src/engine/types.ts';
import { answerTurn, decidedInProcess } from '../../src/http/answer-turn.ts';
import { ruleOutcome } from '../support/outcome.ts';

const outcome = (source: DecisionSource): RuleOutcome => ruleOutcome({ allowed: source !== 'cache', source });

describe('answerTurn', () => {
  it('answers a decision with a verdict from Redis at once', () => {
    expect(answerTurn({ outcomes: [outcome('cache'), outcome('redis')] })).toBeUndefined();
    expect(decidedInProcess({ outcomes: [outcome('redis')] })).toBe(false);
  });

  it('holds an answer decided in process until the check phase: after every pending microtask, before I/O of the next turn', async () => {
    for (const outcomes of [[outcome('cache')], [outcome('lease')], [outcome('fail-open')], []]) {
      expect(decidedInProcess({ outcomes })).toBe(true);
      const order: string[] = [];
      const turn = answerTurn({ outcomes });
      expect(turn).toBeInstanceOf(Promise);
      void turn!.then(() => order.push('answer'));
      // Microtasks queued after it still run first; the answer comes in the check phase, with setImmediate's order.
      void Promise.resolve().then(() => order.push('microtask'));
      await new Promise<void>((resolve) => setImmediate(resolve));
      await Promise.resolve();
      expect(order).toEqual(['microtask', 'answer']);
    }
  });

  it('answers the decisions of one turn together, in arrival order; one asked for while answering waits for the next turn', async () => {
    const order: string[] = [];
    const inProcess = { outcomes: [outcome('cache')] };
    let next: Promise<unknown> | undefined;
    const turns = [1, 2, 3].map((i) =>
      answerTurn(inProcess)!.then(() => {
        order.push(`answer ${i}`);
        if (i === 1) next = answerTurn(inProcess)!.then(() => order.push('answer 4'));
      }),
    );
    setImmediate(() => order.push('an immediate set after them'));
    await Promise.all(turns);
    await next;
    expect(order).toEqual(['answer 1', 'answer 2', 'answer 3', 'an immediate set after them', 'answer 4']);
  });
});

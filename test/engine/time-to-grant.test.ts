// The time-to-grant tracker against the real prom-client histogram: one observation per key from its first
// false denial to its next admission in the same window/epoch; none across a window edge; bounded keys.
import { expect, it } from 'vitest';
import { timeToGrantSeconds } from '../../src/metrics.ts';
import { createTimeToGrant } from '../../src/engine/time-to-grant.ts';

const series = async (rule: string) => {
  const values = (await timeToGrantSeconds.get()).values.filter((v) => v.labels.rule === rule);
  return {
    count: values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0,
    sum: values.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0,
  };
};

it('observes the first false denial to the next admission, once, within one window', async () => {
  const tracker = createTimeToGrant();
  tracker.decided('t1', 'k', 1_000, 10_100, false, false); // a plain denial: nothing waits
  expect(tracker.size).toBe(0);
  tracker.decided('t1', 'k', 1_000, 10_200, false, true); // first false denial
  tracker.decided('t1', 'k', 1_000, 10_300, false, true); // a later one does not restart the clock
  tracker.decided('t1', 'k', 1_000, 10_450, true, false); // admitted: 250 ms
  tracker.decided('t1', 'k', 1_000, 10_500, true, false); // nothing waits any more
  expect(await series('t1')).toEqual({ count: 1, sum: 0.25 });
  expect(tracker.size).toBe(0);
});

it('does not observe an admission in a later window, and forgets the oldest key when full', async () => {
  const tracker = createTimeToGrant(2);
  tracker.decided('t2', 'k', 1_000, 10_900, false, true);
  tracker.decided('t2', 'k', 1_000, 11_050, true, false); // the next window: not a grant
  expect(await series('t2')).toEqual({ count: 0, sum: 0 });
  for (const key of ['a', 'b', 'c']) tracker.decided('t2', key, 1_000, 20_000, false, true);
  expect(tracker.size).toBe(2);
  tracker.decided('t2', 'a', 1_000, 20_100, true, false); // 'a' was forgotten
  tracker.decided('t2', 'c', 1_000, 20_100, true, false);
  expect((await series('t2')).count).toBe(1);
});

// The watch sweep's pacing (src/federation/gossip/watch-sweep.ts): a watched shard whose sweeps rebalance nothing
// is swept less and less often (1, 2, 4, then 8 sync intervals apart), one whose sweep moved rights is swept again
// next round, a flush sweeps everything at once, and a shard no longer watched starts afresh.
import { describe, expect, it } from 'vitest';
import { createSweepPacer, MAX_SWEEP_BACKOFF_ROUNDS } from '../../src/federation/gossip/watch-sweep.ts';

const INTERVAL = 100;

/** Runs `rounds` sync rounds of one watched shard; `changedAt` says which sweeps moved rights. Returns the swept rounds. */
function run(rounds: number, changedAt: (round: number) => boolean, resetAt?: number): number[] {
  let clock = 1_000_000;
  const pacer = createSweepPacer(INTERVAL, () => clock);
  const swept: number[] = [];
  for (let round = 0; round < rounds; round++) {
    if (round === resetAt) pacer.reset();
    const { due } = pacer.due([5], clock);
    if (due.length > 0) {
      swept.push(round);
      pacer.swept(due, changedAt(round) ? due : [], due);
    }
    clock += INTERVAL;
  }
  return swept;
}

const gaps = (rounds: number[]) => rounds.slice(1).map((round, i) => round - rounds[i]!);

describe('watch sweep pacing', () => {
  it('backs off a shard whose sweeps change nothing: 1, 2, 4, then every 8 intervals', () => {
    const swept = run(60, () => false);
    expect(gaps(swept).slice(0, 4)).toEqual([1, 2, 4, MAX_SWEEP_BACKOFF_ROUNDS]);
    expect(Math.max(...gaps(swept))).toBe(MAX_SWEEP_BACKOFF_ROUNDS);
    expect(swept.length).toBeLessThan(12);
  });

  it('sweeps every round while the sweeps move rights, and backs off again after', () => {
    const swept = run(30, (round) => round < 10);
    expect(swept.slice(0, 11)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(gaps(swept.slice(10)).slice(0, 3)).toEqual([1, 2, 4]);
  });

  it('sweeps at once after a reset (a flush), and forgets a shard that is no longer watched', () => {
    const swept = run(40, () => false, 20);
    expect(swept).toContain(20);
    let clock = 0;
    const pacer = createSweepPacer(INTERVAL, () => clock);
    pacer.swept([3], [], [3]);
    clock += INTERVAL;
    expect(pacer.due([3], clock).due).toEqual([3]);
    pacer.swept([3], [], [3]);
    clock += INTERVAL;
    expect(pacer.due([3], clock)).toEqual({ due: [], waiting: [3] });
    // Unwatched (its keys left the watch set): the next time it is watched, it is swept at once.
    pacer.swept([3], [], []);
    expect(pacer.due([3], clock).due).toEqual([3]);
  });
});

// Which shards each publisher lane looks at: every shard at first, the rung ones after, and the polling variant
// (a Redis Cluster) every shard always.
import { describe, expect, it } from 'vitest';
import { createDirtyShards, pollingShards } from '../../src/federation/gossip/dirty-shards.ts';
import { KEY_SHARDS } from '../../src/keys.ts';

const ALL = Array.from({ length: KEY_SHARDS }, (_, shard) => shard);

describe('dirty shards', () => {
  it('are every shard for every lane at first, then only what rang or was kept', () => {
    const dirty = createDirtyShards([0, 2]);
    for (const lane of ['fast', 'watch', 0, 2] as const) expect(dirty.take(lane)).toEqual(ALL);
    expect(dirty.pending('fast')).toBe(false);
    expect(dirty.take(0)).toEqual([]);
    dirty.mark(7);
    dirty.mark(3);
    expect(dirty.take('fast')).toEqual([3, 7]);
    expect(dirty.take(2)).toEqual([3, 7]);
    // Taken by one lane, still dirty for the others.
    expect(dirty.pending('watch')).toBe(true);
    dirty.keep(2, [9]);
    expect(dirty.take(2)).toEqual([9]);
    expect(dirty.take(0)).toEqual([3, 7]);
    dirty.markAll();
    expect(dirty.take('watch')).toEqual(ALL);
    expect(() => dirty.take(1)).toThrow(/no publisher lane/);
  });

  it('a shard put off comes back when its time is up, or at once when its bell rings for the lane', () => {
    let now = 1_000;
    const dirty = createDirtyShards([0, 2], () => now);
    for (const lane of ['fast', 'watch', 0, 2] as const) dirty.take(lane);
    dirty.defer('watch', 4, 800);
    dirty.defer('watch', 5, 300);
    dirty.defer('watch', 6, 800);
    expect(dirty.take('watch')).toEqual([]);
    now += 299;
    expect(dirty.take('watch')).toEqual([]);
    now += 1;
    expect(dirty.take('watch')).toEqual([5]);
    // Its bell rang for the sweep (or for every lane): back at once; another lane's bell leaves it put off.
    dirty.markLanes(4, ['watch']);
    dirty.markLanes(6, ['fast']);
    expect(dirty.take('watch')).toEqual([4]);
    now += 500;
    expect(dirty.take('watch')).toEqual([6]);
    // Taken once, gone: the deferral is not a standing schedule.
    now += 10_000;
    expect(dirty.take('watch')).toEqual([]);
    // Put off, then kept (work left) or everything marked: no longer put off.
    dirty.defer('watch', 8, 5_000);
    dirty.keep('watch', [8]);
    expect(dirty.take('watch')).toEqual([8]);
    dirty.defer('watch', 9, 5_000);
    dirty.markAll();
    expect(dirty.take('watch')).toEqual(ALL);
    now += 5_000;
    expect(dirty.take('watch')).toEqual([]);
  });

  it('poll: every shard, always', () => {
    const dirty = pollingShards();
    expect(dirty.take('fast')).toEqual(ALL);
    expect(dirty.take('fast')).toEqual(ALL);
    expect(dirty.pending(5)).toBe(true);
    // Nothing is put off where no bell could bring a shard back.
    dirty.defer('watch', 3, 10_000);
    expect(dirty.take('watch')).toEqual(ALL);
  });
});

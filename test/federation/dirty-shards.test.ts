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

  it('poll: every shard, always', () => {
    const dirty = pollingShards();
    expect(dirty.take('fast')).toEqual(ALL);
    expect(dirty.take('fast')).toEqual(ALL);
    expect(dirty.pending(5)).toBe(true);
  });
});

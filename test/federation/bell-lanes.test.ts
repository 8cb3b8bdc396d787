// What a bell's element names (lua/includes/bell.lua, read by src/federation/gossip/bells.ts) and what the publisher
// then looks at (dirty-shards.ts). The Lua side is read from a real redis-server in test/store/decide-layout.test.ts.
import { describe, expect, it } from 'vitest';
import { bellLanes } from '../../src/federation/gossip/bells.ts';
import { createDirtyShards } from '../../src/federation/gossip/dirty-shards.ts';

describe('bell lanes', () => {
  it('reads the mask: bit 0 the fast lane, bit 1 the watch sweep, bit 2 + d the round to peer d', () => {
    expect(bellLanes('L1')).toEqual(['fast']);
    expect(bellLanes('L2')).toEqual(['watch']);
    expect(bellLanes('L12')).toEqual([0, 1]);
    expect(bellLanes(`L${2 ** 30}`)).toEqual([28]);
    expect(bellLanes('L0')).toEqual([]);
  });

  it('takes any other element for every lane (the resync, an older version)', () => {
    expect(bellLanes('1')).toBe('all');
    expect(bellLanes('')).toBe('all');
    expect(bellLanes('L')).toBe('all');
  });

  it('marks a shard dirty for the named lanes only, ignoring a peer this publisher does not have', () => {
    const dirty = createDirtyShards([1, 2]);
    for (const lane of ['fast', 'watch', 1, 2] as const) dirty.take(lane);
    dirty.markLanes(7, [2, 5]);
    expect(dirty.take(2)).toEqual([7]);
    expect(dirty.take(1)).toEqual([]);
    expect(dirty.take('fast')).toEqual([]);
    expect(dirty.take('watch')).toEqual([]);
  });
});

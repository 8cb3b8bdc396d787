// Which shards the publisher's lanes must look at. A shard is dirty for every lane when its bell rang (bells.ts),
// and for all shards at once at start, after any Redis error or reconnect, and at every full pass; each lane
// takes its dirty shards and puts back the ones it left work in (a take that did not empty the set, a failed
// send). When the publisher cannot wait on bells (a Redis Cluster) every shard is dirty for every lane, always:
// the lanes poll, as they would without bells.
import { KEY_SHARDS } from '../../keys.ts';

/** A lane of the publisher: the fast lane, the watch sweep, or the sync round to the peer with this index. */
export type Lane = 'fast' | 'watch' | number;

export interface DirtyShards {
  /** Marks a shard dirty for every lane (its bell rang for every lane). */
  mark(shard: number): void;
  /** Marks a shard dirty for the lanes its bell named (bells.ts); a lane this publisher does not have is ignored. */
  markLanes(shard: number, lanes: readonly Lane[]): void;
  /** Marks every shard dirty for every lane (start, a Redis error or reconnect, a full pass). */
  markAll(): void;
  /** The lane's dirty shards, ascending; they are no longer dirty for it. */
  take(lane: Lane): number[];
  /** Makes shards dirty again for one lane (work left behind). */
  keep(lane: Lane, shards: Iterable<number>): void;
  /** Whether the lane has a dirty shard. */
  pending(lane: Lane): boolean;
}

const ALL_SHARDS: readonly number[] = Array.from({ length: KEY_SHARDS }, (_, shard) => shard);

/** Every shard dirty for every lane, always (no bells to wait on: the lanes poll). */
export function pollingShards(): DirtyShards {
  return {
    mark: () => undefined,
    markLanes: () => undefined,
    markAll: () => undefined,
    take: () => [...ALL_SHARDS],
    keep: () => undefined,
    pending: () => true,
  };
}

/** Dirty shards per lane, every shard dirty at first. */
export function createDirtyShards(peerIndexes: readonly number[]): DirtyShards {
  const lanes = new Map<Lane, Set<number>>([
    ['fast', new Set()],
    ['watch', new Set()],
    ...peerIndexes.map((peer): [Lane, Set<number>] => [peer, new Set()]),
  ]);
  const laneOf = (lane: Lane): Set<number> => {
    const set = lanes.get(lane);
    if (!set) throw new Error(`no publisher lane ${String(lane)}`);
    return set;
  };
  const dirty: DirtyShards = {
    mark(shard) {
      for (const set of lanes.values()) set.add(shard);
    },
    markLanes(shard, named) {
      for (const lane of named) lanes.get(lane)?.add(shard);
    },
    markAll() {
      for (const set of lanes.values()) for (const shard of ALL_SHARDS) set.add(shard);
    },
    take(lane) {
      const set = laneOf(lane);
      const shards = [...set].sort((a, b) => a - b);
      set.clear();
      return shards;
    },
    keep(lane, shards) {
      const set = laneOf(lane);
      for (const shard of shards) set.add(shard);
    },
    pending: (lane) => laneOf(lane).size > 0,
  };
  dirty.markAll();
  return dirty;
}

// Which shards the publisher's lanes must look at. A shard is dirty for every lane when its bell rang (bells.ts),
// and for all shards at once at start, after any Redis error or reconnect, and at every full pass; each lane
// takes its dirty shards and puts back the ones it left work in (a take that did not empty the set, a failed
// send). A lane may also put a shard off until a time (`defer`: the watch sweep's idle holders, whose sweeps change
// nothing until then): it comes back to the lane's take then, or at once when its bell rings for the lane. When the
// publisher cannot wait on bells (a Redis Cluster) every shard is dirty for every lane, always: the lanes poll, as
// they would without bells, and nothing is put off (no bell would bring a shard back early).
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
  /**
   * Puts a shard off for one lane for `ms`: the lane's take leaves it out until then, unless the shard is marked
   * (its bell rang for the lane, markAll) or kept meanwhile.
   */
  defer(lane: Lane, shard: number, ms: number): void;
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
    defer: () => undefined,
    pending: () => true,
  };
}

/**
 * Dirty shards per lane, every shard dirty at first. `now` (ms, monotonic) times the deferrals.
 *
 * @example
 * ```ts
 * const dirty = createDirtyShards([1, 2]);
 * dirty.take('watch'); // every shard, once
 * dirty.defer('watch', 5, 800); // shard 5 comes back to take('watch') in 800 ms, or when its bell rings for the sweep
 * ```
 */
export function createDirtyShards(peerIndexes: readonly number[], now: () => number = () => performance.now()): DirtyShards {
  const lanes = new Map<Lane, Set<number>>([
    ['fast', new Set()],
    ['watch', new Set()],
    ...peerIndexes.map((peer): [Lane, Set<number>] => [peer, new Set()]),
  ]);
  /** Per lane, the shards put off and until when. */
  const deferred = new Map<Lane, Map<number, number>>();
  const laneOf = (lane: Lane): Set<number> => {
    const set = lanes.get(lane);
    if (!set) throw new Error(`no publisher lane ${String(lane)}`);
    return set;
  };
  const add = (lane: Lane, shard: number) => {
    lanes.get(lane)?.add(shard);
    deferred.get(lane)?.delete(shard);
  };
  const dirty: DirtyShards = {
    mark(shard) {
      for (const lane of lanes.keys()) add(lane, shard);
    },
    markLanes(shard, named) {
      for (const lane of named) add(lane, shard);
    },
    markAll() {
      for (const set of lanes.values()) for (const shard of ALL_SHARDS) set.add(shard);
      deferred.clear();
    },
    take(lane) {
      const set = laneOf(lane);
      const waiting = deferred.get(lane);
      if (waiting !== undefined && waiting.size > 0) {
        const at = now();
        for (const [shard, until] of waiting) {
          if (until > at) continue;
          set.add(shard);
          waiting.delete(shard);
        }
      }
      const shards = [...set].sort((a, b) => a - b);
      set.clear();
      // A shard taken while put off (its bell rang) is the lane's again: its next deferral is the one that counts.
      if (waiting !== undefined) for (const shard of shards) waiting.delete(shard);
      return shards;
    },
    keep(lane, shards) {
      laneOf(lane);
      for (const shard of shards) add(lane, shard);
    },
    defer(lane, shard, ms) {
      laneOf(lane);
      let waiting = deferred.get(lane);
      if (waiting === undefined) {
        waiting = new Map();
        deferred.set(lane, waiting);
      }
      waiting.set(shard, now() + ms);
    },
    pending: (lane) => laneOf(lane).size > 0,
  };
  dirty.markAll();
  return dirty;
}

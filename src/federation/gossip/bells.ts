// The publisher's wait on the shards' bells (keys.ts bellKey, rung by lua/includes/bell.lua): one blocking
// connection runs BLMPOP over the 64 bells, then pops every other rung bell in one call (drain_bells.lua), marks
// each rung shard dirty for the lanes its bell names (a peer's sync round, the fast lane, the watch sweep) and wakes
// the publisher. A single Redis only: a multi-key BLMPOP cannot span a cluster's slots (there the lanes poll).
// Losing a bell can only delay a send, never lose a key (the key stays in its set): every shard is marked dirty
// after any error or reconnect of this connection, and the publisher's full passes catch anything else.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { KEY_SHARDS, shardOfKey, type KeyLayout } from '../../keys.ts';
import { withScript } from '../../store/commands.ts';
import { drainBellsCall, runDrainBells } from '../../store/gossip-calls.ts';
import type { DirtyShards, Lane } from './dirty-shards.ts';

/** How long one BLMPOP blocks (s): an idle region asks again this often. */
export const BELL_WAIT_S = 5;
/** Pause after a failed wait (Redis down) before the next one. */
const RETRY_MS = 1_000;

const SHARDS: readonly number[] = Array.from({ length: KEY_SHARDS }, (_, shard) => shard);

/**
 * A full pass on a single Redis: one EXISTS over each lane's 64 sets (an empty set does not exist), and every shard
 * dirty for the lanes that have any key at all. The cross-slot EXISTS is why this is for a single Redis only.
 */
export async function markLanesWithWork(redis: Redis, keys: KeyLayout, dirty: DirtyShards, peerIndexes: readonly number[]): Promise<void> {
  const lanes: [Lane, string[]][] = [
    ['fast', SHARDS.map(keys.fastSetKey)],
    ['watch', SHARDS.map(keys.watchSetKey)],
    ...peerIndexes.map((peer): [Lane, string[]] => [peer, SHARDS.map((shard) => keys.peerPendingKey(shard, peer))]),
  ];
  const found = await Promise.all(lanes.map(([, keys]) => redis.exists(...keys)));
  lanes.forEach(([lane], i) => {
    if (found[i]! > 0) dirty.keep(lane, SHARDS);
  });
}

/** The highest peer index with a bit of its own in a bell's mask (lua/includes/bell.lua BELL_MAX_PEER). */
const BELL_MAX_PEER = 28;

/**
 * The lanes a bell's element names (lua/includes/bell.lua): 'L' and a mask, bit 0 the fast lane, bit 1 the watch
 * sweep, bit 2 + d the sync round to peer d; anything else ('1') names every lane.
 *
 * @example
 * bellLanes('L21'); // ['fast', 0, 2]
 * bellLanes('1'); // 'all'
 */
export function bellLanes(element: string): Lane[] | 'all' {
  const match = /^L(\d+)$/.exec(element);
  if (match === null) return 'all';
  return maskLanes(Number(match[1]));
}

/**
 * The lanes of a bell's mask (the number after 'L'; a merge's reply answers it too: gossip-calls.ts
 * ApplyGossipReply.lanes), a negative mask naming every lane.
 *
 * @example
 * maskLanes(21); // ['fast', 0, 2]
 * maskLanes(-1); // 'all'
 */
export function maskLanes(mask: number): Lane[] | 'all' {
  if (mask < 0) return 'all';
  const lanes: Lane[] = [];
  if (mask & 1) lanes.push('fast');
  if (mask & 2) lanes.push('watch');
  for (let peer = 0; peer <= BELL_MAX_PEER; peer++) if (mask & (1 << (2 + peer))) lanes.push(peer);
  return lanes;
}

/** Marks `shard` dirty for `lanes` (maskLanes, bellLanes), every lane for 'all'. */
export function markShardLanes(dirty: DirtyShards, shard: number, lanes: Lane[] | 'all'): void {
  if (lanes === 'all') dirty.mark(shard);
  else dirty.markLanes(shard, lanes);
}

export interface BellWaiter {
  /** Stops waiting (drops the blocking connection). */
  stop(): void;
}

/**
 * Waits on the bells over a duplicate of `redis` (its command timeout above the block time) until stopped;
 * `onRing` runs after every wake with its shards marked in `dirty` (every shard after an error or reconnect).
 * Two wakes are at least `gapMs` apart (the fast lane's least gap): bells that ring meanwhile stay rung, so a
 * busy shard's scripts find them rung and cost one LLEN each.
 */
export function startBellWaiter(
  redis: Redis,
  keys: KeyLayout,
  dirty: DirtyShards,
  onRing: () => void,
  logger: Logger,
  gapMs = 0,
): BellWaiter {
  const bells: readonly string[] = SHARDS.map(keys.bellKey);
  const blocking = redis.duplicate({
    commandTimeout: BELL_WAIT_S * 1_000 + 5_000,
    enableAutoPipelining: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
  });
  let stopped = false;
  const everything = () => {
    dirty.markAll();
    onRing();
  };
  blocking.on('error', (error: Error) => logger.debug({ event: 'federation.bell_error', error: error.message }, 'bell connection error'));
  // A (re)connect may follow a lost reply or a Redis that lost its data: look at everything once.
  blocking.on('ready', everything);
  const scripted = withScript(blocking, 'drainBells');
  const drain = drainBellsCall(bells);
  const markRung = (shard: number, elements: readonly string[]): void => {
    for (const element of elements) markShardLanes(dirty, shard, bellLanes(element));
  };

  const untilReady = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        blocking.off('ready', done);
        resolve();
      };
      const timer = setTimeout(done, RETRY_MS);
      timer.unref();
      blocking.once('ready', done);
    });

  void (async () => {
    while (!stopped) {
      if (blocking.status !== 'ready') {
        // Connecting (or reconnecting: its 'ready' marks everything dirty).
        await untilReady();
        continue;
      }
      try {
        const popped = await blocking.blmpop(BELL_WAIT_S, KEY_SHARDS, ...bells, 'LEFT', 'COUNT', KEY_SHARDS);
        if (popped === null) continue;
        markRung(shardOfKey(popped[0]), popped[1]);
        const wokeAt = Date.now();
        // BLMPOP pops one list: the other rung bells, in one call, before waking the publisher.
        for (const { bell, elements } of await runDrainBells(scripted, drain)) markRung(shardOfKey(bell), elements);
        onRing();
        const rest = wokeAt + gapMs - Date.now();
        if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest).unref());
      } catch (error) {
        if (stopped) break;
        logger.debug({ event: 'federation.bell_wait_failed', error: (error as Error).message }, 'waiting on the bells failed');
        everything();
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref());
      }
    }
  })();

  return {
    stop() {
      stopped = true;
      blocking.disconnect();
    },
  };
}

// The replay record: which (sender, seq) pairs this region has applied, kept in the region's Redis so every
// worker instance and every restart sees it. Bounded per sender: the newest RETAINED sequence numbers are kept;
// anything at or below the oldest retained one, once the record is full, is treated as replayed (it cannot be
// told apart from one). Sequence numbers are µs-clock based (see publisher.ts), so a restarted or wiped sender
// still sends numbers above the ones recorded.
//
// Replays of genuine jobs could not change a counter anyway (merging is a max), but the record lets a replay
// be seen, counted and logged rather than silently absorbed. A job is checked and recorded in the call that
// applies it (gossip-calls.ts runApplyJob, lua/includes/replay.lua); a resync job is checked here first.
import type { KeyLayout } from '../../keys.ts';
import type { QuotafedCommands } from '../../store/commands.ts';
import { replayCall, runReplayCheck } from '../../store/gossip-calls.ts';

/** Jobs remembered per sender: with one job per sync interval per peer, 20k covers ≥ 30 min at 100 ms. */
export const RETAINED = 20_000;

/**
 * Has this region applied `seq` from `from` already? (The record lives under the region's layout, `keys`.) One
 * script call (replay_check.lua).
 *
 * @example
 * if (await alreadyApplied(redis, keys, 'eu-west', 1_796_000_000_000_000)) return reject('replayed');
 */
export async function alreadyApplied(
  redis: Pick<QuotafedCommands, 'replayCheck'>,
  keys: KeyLayout,
  from: string,
  seq: number,
): Promise<boolean> {
  return runReplayCheck(redis, replayCall(keys.replayKey(from), seq, RETAINED));
}

// The typed call of reset_key.lua: an operator's reset of one state key (src/federation/key-reset.ts).
import { layoutOfKey, shardOfKey } from '../keys.ts';
import type { ScriptedRedis } from './commands.ts';
import { integerReply } from './replies.ts';
import { runScript, type ScriptCall } from './script-call.ts';

/**
 * Resets a state key: KEYS the key, its shard's pending sets (one per region index below `regions`), fast lane
 * and watch set (all in the key's hash slot); ARGV how long the reset mark lives (ms).
 */
export function resetKeyCall(stateKey: string, regions: number, markMs: number): ScriptCall {
  const shard = shardOfKey(stateKey);
  const layout = layoutOfKey(stateKey);
  const pending = Array.from({ length: regions }, (_, index) => layout.peerPendingKey(shard, index));
  return { keys: [stateKey, ...pending, layout.fastSetKey(shard), layout.watchSetKey(shard)], args: [markMs] };
}

/** Whether the key held state before the reset. */
export async function runResetKey(redis: ScriptedRedis, call: ScriptCall): Promise<boolean> {
  return integerReply('reset_key', await runScript(redis, 'resetKey', call)) === 1;
}

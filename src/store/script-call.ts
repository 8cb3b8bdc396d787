// One script call as the typed calls build it (KEYS and ARGV in the script's order), how it is sent, and the
// algorithm codes every script takes. BullMQ's src/classes/scripts.ts is the model: per script one builder
// that lays out KEYS and ARGV exactly as the script documents them, one parser of its reply, one runner.
import type { Algorithm } from '../config/schema.ts';
import type { QuotafedCommands, ScriptCommand, ScriptName } from './commands.ts';

/** The algorithm codes every script takes (ARGV), one per algorithm of the config schema. */
export const ALGORITHM_CODES: Record<Algorithm, string> = {
  tokenBucket: 'tb',
  fixedWindow: 'fw',
  slidingWindow: 'sw',
  slidingLog: 'sl',
  concurrency: 'cc',
};

/** One script call: its KEYS and its ARGV, in the script's order. */
export interface ScriptCall {
  keys: string[];
  args: (string | number)[];
}

/** Sends `call` with the registered command `name` (the client must come from withScripts or withScript). */
export function runScript<N extends ScriptName>(redis: Pick<QuotafedCommands, N>, name: N, call: ScriptCall): Promise<unknown> {
  const command: ScriptCommand = redis[name];
  return command.call(redis, call.keys.length, ...call.keys, ...call.args);
}

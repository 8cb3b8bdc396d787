// decide through Redis Functions (FCALL of the decide library), with EVALSHA of the script as the fallback
// for a server that cannot load functions.
import type { ScriptedRedis } from './commands.ts';
import { decideBatchArgs, unpackBatchReply } from './decide-calls.ts';
import { functionsOrScripts } from './functions-mode.ts';
import { decideLibrary, type DecideScriptName } from './library.ts';

/** Sends one decide, or several as one batch; a batch answers each call's reply or Error in call order. */
export interface DecideCaller {
  /** One decide call in the numkeys-first form (numkeys, KEYS, ARGV: decideCall's array). */
  (call: readonly (string | number)[]): Promise<unknown>;
  /** Several decide calls, decided in order; each answers its reply or its Error in its place. */
  batch(calls: readonly (readonly (string | number)[])[]): Promise<unknown[]>;
}

/** The options of decideCaller. */
export interface DecideCallerOptions {
  /** false: EVALSHA only, never FUNCTION LOAD (default: Functions when the server has them). */
  functions?: boolean | undefined;
  /** Which decide script (default decide.lua). */
  script?: DecideScriptName | undefined;
}

/**
 * decide through Redis Functions (FCALL), loading the library on first use and on every primary of a
 * cluster. A Redis that lost it (a restart without persistence, a new primary) answers "Function not found":
 * the library is loaded again and the call retried once. Falls back to EVALSHA for good when the server
 * cannot load functions; a batch then goes as its calls, one EVALSHA each (pipelined by the client).
 *
 * @example
 * const caller = decideCaller(withScripts(redis), { script: 'decideSingleRegion' });
 * const reply = parseDecideReply(await caller(decideCall(input)), input.ruleKeys.length);
 */
export function decideCaller(redis: ScriptedRedis, options: DecideCallerOptions = {}): DecideCaller {
  const script = options.script ?? 'decide';
  const { source, fn, batchFn } = decideLibrary(script);
  const withReload = functionsOrScripts(redis, source, options.functions);
  const viaFunction = (call: readonly (string | number)[]) => redis.fcall(fn, ...(call as [number, ...(string | number)[]]));
  const viaScript = (call: readonly (string | number)[]) => redis[script](...(call as [number, ...(string | number)[]]));
  const settled = (calls: readonly (readonly (string | number)[])[]) =>
    Promise.all(
      calls.map((call) =>
        viaScript(call).then(
          (reply) => reply,
          (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
        ),
      ),
    );
  const viaBatch = async (calls: readonly (readonly (string | number)[])[]): Promise<unknown[]> =>
    unpackBatchReply(await redis.fcall(batchFn, ...(decideBatchArgs(calls) as [number, ...(string | number)[]])), calls.length);
  const caller = ((call: readonly (string | number)[]) =>
    withReload(
      () => viaFunction(call),
      () => viaScript(call),
    )) as DecideCaller;
  caller.batch = (calls) =>
    withReload(
      () => viaBatch(calls),
      () => settled(calls),
    );
  return caller;
}

// decide through Redis Functions (FCALL of the decide library), with EVALSHA of the script as the fallback
// for a server that cannot load functions.
import { Cluster, type Redis } from 'ioredis';
import type { ScriptedRedis } from './commands.ts';
import { decideBatchArgs } from './decide-calls.ts';
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

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The server has no Functions (before Redis 7) or this user may not load them: EVALSHA it is. */
function functionsUnavailable(error: unknown): boolean {
  return /unknown command|unknown subcommand|NOPERM/i.test(messageOf(error));
}

async function loadLibrary(redis: Redis, source: string): Promise<void> {
  try {
    await redis.call('FUNCTION', 'LOAD', source);
  } catch (error) {
    // Loaded already (by another instance, or before a reconnect): the name is the source's hash.
    if (!/already exists/i.test(messageOf(error))) throw error;
  }
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
  let mode: 'function' | 'script' | undefined = options.functions === false ? 'script' : undefined;
  let loading: Promise<void> | undefined;
  const load = () =>
    (loading ??= (async () => {
      try {
        const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
        await Promise.all(nodes.map((node) => loadLibrary(node, source)));
        mode = 'function';
      } catch (error) {
        if (!functionsUnavailable(error)) throw error;
        mode = 'script';
      } finally {
        loading = undefined;
      }
    })());
  // A function, so the compiler does not narrow `mode` across the awaits that change it.
  const usingScripts = () => mode === 'script';
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
  const viaBatch = async (calls: readonly (readonly (string | number)[])[]) =>
    (await redis.fcall(batchFn, ...(decideBatchArgs(calls) as [number, ...(string | number)[]]))) as unknown[];
  const withReload = async <T>(viaFn: () => Promise<T>, viaScripts: () => Promise<T>): Promise<T> => {
    if (mode === undefined) await load();
    if (usingScripts()) return viaScripts();
    try {
      return await viaFn();
    } catch (error) {
      if (!/function not found/i.test(messageOf(error))) throw error;
      await load();
      return usingScripts() ? viaScripts() : viaFn();
    }
  };
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

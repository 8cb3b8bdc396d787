// Redis Functions with EVALSHA as the fallback: a library is loaded on first use (on every primary of a cluster),
// again when the server lost it, and given up for good on a server that cannot load functions.
import { Cluster, type Redis } from 'ioredis';

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

/** Runs a call as a function of the library, or as its script where the server cannot load functions. */
export type FunctionsOrScripts = <T>(viaFunction: () => Promise<T>, viaScript: () => Promise<T>) => Promise<T>;

/**
 * One library on one client: loads it on first use and on every primary of a cluster. A Redis that lost it (a
 * restart without persistence, a new primary) answers "Function not found": the library is loaded again and
 * the call retried once. `functions: false` never loads it (EVALSHA only).
 *
 * @example
 * const run = functionsOrScripts(redis, gossipLibrary().source);
 * await run(() => redis.fcall(applyFn, ...call), () => redis.applyGossip(...call));
 */
export function functionsOrScripts(redis: Redis | Cluster, source: string, functions?: boolean): FunctionsOrScripts {
  let mode: 'function' | 'script' | undefined = functions === false ? 'script' : undefined;
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
  return async (viaFunction, viaScript) => {
    if (mode === undefined) await load();
    if (usingScripts()) return viaScript();
    try {
      return await viaFunction();
    } catch (error) {
      if (!/function not found/i.test(messageOf(error))) throw error;
      await load();
      return usingScripts() ? viaScript() : viaFunction();
    }
  };
}

// Loads the Lua scripts in lua/ once, resolves their `--- @include "includes/<name>"` lines (BullMQ's
// convention) and registers them with ioredis, which sends EVALSHA and falls back to EVAL on NOSCRIPT.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster, type Redis } from 'ioredis';
import { LUA_DIR } from '../paths.ts';
import { errorMessage } from './errors.ts';

export const SCRIPTS = {
  decide: 'decide',
  applyGossip: 'apply_gossip',
  takePending: 'take_pending',
  ackPending: 'ack_pending',
  releaseLeases: 'release_leases',
  refund: 'refund',
  settleFallback: 'settle_fallback',
  screenGossip: 'screen_gossip',
  sweepWatch: 'sweep_watch',
  renewLock: 'renew_lock',
  releaseLock: 'release_lock',
} as const;
export type ScriptName = keyof typeof SCRIPTS;

const INCLUDE = /^--- @include "([^"]+)"\s*$/gm;

/** The full source of a script with its includes expanded (each include once, in order). */
export function scriptSource(file: string): string {
  const seen = new Set<string>();
  const expand = (name: string): string => {
    const text = readFileSync(join(LUA_DIR, `${name}.lua`), 'utf8');
    return text.replace(INCLUDE, (_, include: string) => {
      if (seen.has(include)) return '';
      seen.add(include);
      return expand(include);
    });
  };
  return expand(file);
}

const sources = new Map<ScriptName, string>();
export function luaSource(name: ScriptName): string {
  let source = sources.get(name);
  if (source === undefined) {
    source = scriptSource(SCRIPTS[name]);
    sources.set(name, source);
  }
  return source;
}

type Reply = unknown;
/** The commands this module adds to a client. Keys come first; the count is passed explicitly. */
export interface QuotafedCommands {
  decide(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  applyGossip(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  takePending(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  ackPending(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  releaseLeases(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  refund(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  settleFallback(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  screenGossip(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  sweepWatch(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  renewLock(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
  releaseLock(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
}

export type ScriptedRedis = (Redis | Cluster) & QuotafedCommands;

/** Registers every script on the client (idempotent) and returns it typed with the script commands. */
export function withScripts(redis: Redis | Cluster): ScriptedRedis {
  const scripted = redis as ScriptedRedis;
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    if (typeof (scripted as unknown as Record<string, unknown>)[name] !== 'function') {
      redis.defineCommand(name, { lua: luaSource(name) });
    }
  }
  return scripted;
}

/**
 * decide.lua as a Redis Functions library: the includes' functions are created once at FUNCTION LOAD instead
 * of on every EVALSHA, and the script body becomes the registered function. The names carry a hash of the
 * source, so two quotafed versions sharing a Redis each call their own code.
 */
export function decideLibrary(): { source: string; library: string; fn: string } {
  const script = luaSource('decide');
  const hash = createHash('sha1').update(script).digest('hex').slice(0, 12);
  const bodyAt = script.indexOf(DECIDE_BODY_MARK);
  if (bodyAt === -1) throw new Error(`lua/decide.lua lost its "${DECIDE_BODY_MARK}" line`);
  const library = `quotafed_${hash}`;
  const fn = `qf_decide_${hash}`;
  // An EVAL starts every call with fresh top-level tables (memos such as federation.lua's zero slots); the
  // library keeps its upvalues between calls, so the function renews each one first: results stay identical.
  const prelude = script.slice(0, bodyAt);
  const renew = [...prelude.matchAll(/^local ([A-Za-z_][A-Za-z0-9_]*) = \{\}\s*$/gm)].map(([, name]) => `  ${name} = {}`);
  const source = [
    `#!lua name=${library}`,
    prelude,
    'local function decide(KEYS, ARGV)',
    ...renew,
    script.slice(bodyAt),
    'end',
    `redis.register_function('${fn}', decide)`,
    '',
  ].join('\n');
  return { source, library, fn };
}

/** Where the per-call part of decide.lua starts (everything above it only defines functions). */
const DECIDE_BODY_MARK = 'local n = tonumber(ARGV[2])';

/** Sends one decide (numkeys, keys, then arguments, as EVALSHA takes them). */
export type DecideCall = (call: readonly (string | number)[]) => Promise<unknown>;

/** The server has no Functions (before Redis 7) or this user may not load them: EVALSHA it is. */
function functionsUnavailable(error: unknown): boolean {
  return /unknown command|unknown subcommand|NOPERM/i.test(errorMessage(error));
}

async function loadLibrary(redis: Redis, source: string): Promise<void> {
  try {
    await redis.call('FUNCTION', 'LOAD', source);
  } catch (error) {
    // Loaded already (by another instance, or before a reconnect): the name is the source's hash.
    if (!/already exists/i.test(errorMessage(error))) throw error;
  }
}

/**
 * decide through Redis Functions (FCALL), loading the library on first use and on every primary of a
 * cluster. A Redis that lost it (a restart without persistence, a new primary) answers "Function not found":
 * the library is loaded again and the call retried once. Falls back to EVALSHA for good when the server
 * cannot load functions.
 */
export function decideCaller(redis: ScriptedRedis, options: { functions?: boolean } = {}): DecideCall {
  const { source, fn } = decideLibrary();
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
  const viaScript = (call: readonly (string | number)[]) => redis.decide(...(call as [number, ...(string | number)[]]));
  return async (call) => {
    if (mode === undefined) await load();
    if (usingScripts()) return viaScript(call);
    try {
      return await viaFunction(call);
    } catch (error) {
      if (!/function not found/i.test(errorMessage(error))) throw error;
      await load();
      return usingScripts() ? viaScript(call) : viaFunction(call);
    }
  };
}

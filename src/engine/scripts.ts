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
  decideLean: 'decide_lean',
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
  decideLean(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
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

const definedOn = new WeakMap<Redis | Cluster, Set<ScriptName>>();

/**
 * Registers one script on a client another library owns (BullMQ's worker connection, which has commands of
 * its own, `releaseLock` among them): only that command is added, and always ours.
 */
export function withScript<N extends ScriptName>(redis: Redis | Cluster, name: N): (Redis | Cluster) & Pick<QuotafedCommands, N> {
  let registered = definedOn.get(redis);
  if (registered === undefined) definedOn.set(redis, (registered = new Set()));
  if (!registered.has(name)) {
    redis.defineCommand(name, { lua: luaSource(name) });
    registered.add(name);
  }
  return redis as (Redis | Cluster) & Pick<QuotafedCommands, N>;
}

/** The decide scripts: decide.lua (every rule shape, federated or not) and decide_lean.lua (one region). */
export type DecideScript = 'decide' | 'decideLean';

/**
 * A decide script as a Redis Functions library: the includes' functions are created once at FUNCTION LOAD
 * instead of on every EVALSHA, and the script body becomes the registered function `fn`. The library also
 * registers `batchFn`, which decides several calls in order in one FCALL (each exactly as `fn` would, one
 * after the other; see decideBatchArgs). The names carry a hash of the source, so two quotafed versions
 * sharing a Redis each call their own code.
 */
export function decideLibrary(name: DecideScript = 'decide'): { source: string; library: string; fn: string; batchFn: string } {
  const script = luaSource(name);
  const hash = createHash('sha1').update(script).digest('hex').slice(0, 12);
  const bodyAt = script.indexOf(DECIDE_BODY_MARK);
  if (bodyAt === -1) throw new Error(`lua/${SCRIPTS[name]}.lua lost its "${DECIDE_BODY_MARK}" line`);
  const tag = name === 'decide' ? '' : 'lean_';
  const library = `quotafed_${tag}${hash}`;
  const fn = `qf_decide_${tag}${hash}`;
  const batchFn = `qf_decide_batch_${tag}${hash}`;
  // An EVAL starts every call with fresh top-level tables (memos such as federation.lua's zero slots); the
  // library keeps its upvalues between calls, so the function renews each one first: results stay identical.
  const prelude = script.slice(0, bodyAt);
  const renew = [...prelude.matchAll(/^local ([A-Za-z_][A-Za-z0-9_]*) = \{\}\s*$/gm)].map(([, local]) => `  ${local} = {}`);
  const source = [
    `#!lua name=${library}`,
    prelude,
    'local function decide(KEYS, ARGV)',
    ...renew,
    script.slice(bodyAt),
    'end',
    name === 'decide' ? DECIDE_BATCH_LUA : LEAN_DECIDE_BATCH_LUA,
    `redis.register_function('${fn}', decide)`,
    `redis.register_function('${batchFn}', decide_batch)`,
    '',
  ].join('\n');
  return { source, library, fn, batchFn };
}

/** Shared by both batch functions: a call's error in its place, and the batch's one TIME read (ms, as text). */
const BATCH_ERROR_LUA = `
local function batch_error(reply)
  if type(reply) == 'table' and reply.err then return redis.error_reply(reply.err) end
  return redis.error_reply(tostring(reply))
end

-- Redis TIME in ms, as the text decide's now_ms reads (ARGV[6]).
local function batch_clock()
  local t = redis.call('TIME')
  return tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end`;

/**
 * Several decide calls in one: KEYS are the calls' keys one after the other; ARGV[1] is the number of calls,
 * then per call its key count, its argument count and its arguments, or -1 and no arguments when they are
 * the previous call's (the common case: same rules, cost and clock; only the keys differ). Each call runs
 * through `decide` in
 * order, so the batch answers exactly what the calls would one by one. Calls without a pinned clock (ARGV[6]
 * '') are decided at one Redis TIME read once per batch: they are decided in the same instant anyway. A call
 * that raises an error answers that error in its place; the others still decide.
 */
const DECIDE_BATCH_LUA = `${BATCH_ERROR_LUA}

local function decide_batch(keys, args)
  local count = tonumber(args[1])
  local replies = {}
  local batch_now, call_args
  local k, a = 0, 1
  for i = 1, count do
    local nk, na = tonumber(args[a + 1]), tonumber(args[a + 2])
    a = a + 2
    local call_keys = {}
    for j = 1, nk do call_keys[j] = keys[k + j] end
    if na < 0 then
      na = 0
    else
      call_args = {}
      for j = 1, na do call_args[j] = args[a + j] end
    end
    if call_args[6] == '' then
      if batch_now == nil then batch_now = batch_clock() end
      call_args[6] = batch_now
    end
    k, a = k + nk, a + na
    local ok, reply = pcall(decide, call_keys, call_args)
    if ok then
      replies[i] = reply
    else
      replies[i] = batch_error(reply)
    end
  end
  return replies
end`;

/**
 * decide_batch of the lean library (decide_lean.lua). A call whose arguments take decide_lean.lua's one-rule
 * path (one region, one fixed-window or token-bucket rule) goes straight to that path's function
 * (single_fixed_window or single_token_bucket in lean.lua) with the numbers decide would read from its ARGV,
 * read once for a run of calls with the same arguments, and at the clock decide would take: the batch's TIME
 * read or the call's own pinned clock. Every other call goes through `decide` as in DECIDE_BATCH_LUA. Both
 * run under pcall, so an error still answers in its call's place only.
 */
const LEAN_DECIDE_BATCH_LUA = `${BATCH_ERROR_LUA}

local function decide_batch(keys, args)
  local count = tonumber(args[1])
  local replies = {}
  -- The batch's clock: one TIME read, on first need.
  local batch_now
  local function clock()
    if batch_now == nil then batch_now = batch_clock() end
    return batch_now
  end
  -- The current arguments: args[at + j] is ARGV[j] (j <= size); call_args their copy, once decide needs one.
  local at, size, call_args
  -- Their one-rule path, if they take it: the function, its numbers, and the pinned clock ('' for none).
  local single, limit, period, burst, cost, skew, shadow, pinned
  local k, a = 0, 1
  for i = 1, count do
    local nk, na = tonumber(args[a + 1]), tonumber(args[a + 2])
    a = a + 2
    if na >= 0 then
      at, size, call_args, single = a, na, nil, nil
      -- decide_lean.lua's test, on the texts (any other spelling of 1 goes through decide, which reads it).
      if na >= 15 and args[a + 2] == '1' and args[a + 5] == '1' then
        local code = args[a + 7]
        if code == 'fw' then
          single = single_fixed_window
        elseif code == 'tb' then
          single = single_token_bucket
        end
        if single ~= nil then
          limit, period, burst, cost = tonumber(args[a + 8]), tonumber(args[a + 9]), tonumber(args[a + 10]), tonumber(args[a + 11])
          skew, shadow, pinned = tonumber(args[a + 4]), args[a + 15] == '1', args[a + 6]
          -- now_ms(ARGV[6])
          if pinned ~= '' then pinned = tonumber(pinned) end
        end
      end
      a = a + na
    end
    local ok, reply
    if single ~= nil and nk >= 2 then
      local now = pinned
      if now == '' then now = tonumber(clock()) end
      ok, reply = pcall(single, keys[k + 2], limit, period, burst, cost, skew, shadow, now)
    else
      local call_keys = {}
      for j = 1, nk do call_keys[j] = keys[k + j] end
      if call_args == nil then
        call_args = {}
        for j = 1, size do call_args[j] = args[at + j] end
      end
      if call_args[6] == '' then call_args[6] = clock() end
      ok, reply = pcall(decide, call_keys, call_args)
    end
    k = k + nk
    if ok then
      replies[i] = reply
    else
      replies[i] = batch_error(reply)
    end
  end
  return replies
end`;

/** Whether two decide calls take the same arguments (ARGV), whatever their keys. */
function sameArguments(a: readonly (string | number)[], b: readonly (string | number)[]): boolean {
  const aKeys = a[0] as number;
  const bKeys = b[0] as number;
  if (a.length - aKeys !== b.length - bKeys) return false;
  for (let i = 1 + aKeys, j = 1 + bKeys; i < a.length; i++, j++) if (a[i] !== b[j]) return false;
  return true;
}

/** FCALL arguments of a batch (after the function name): numkeys, every call's keys, then the batch ARGV. */
export function decideBatchArgs(calls: readonly (readonly (string | number)[])[]): (string | number)[] {
  let numKeys = 0;
  for (const call of calls) numKeys += call[0] as number;
  const out: (string | number)[] = [numKeys];
  for (const call of calls) {
    const keys = call[0] as number;
    for (let i = 1; i <= keys; i++) out.push(call[i]!);
  }
  out.push(calls.length);
  let previous: readonly (string | number)[] | undefined;
  for (const call of calls) {
    const keys = call[0] as number;
    if (previous !== undefined && sameArguments(previous, call)) {
      out.push(keys, -1);
    } else {
      out.push(keys, call.length - 1 - keys);
      for (let i = 1 + keys; i < call.length; i++) out.push(call[i]!);
    }
    previous = call;
  }
  return out;
}

/** Where the per-call part of a decide script starts (everything above it only defines functions). */
const DECIDE_BODY_MARK = 'local n = tonumber(ARGV[2])';

/** Sends one decide (numkeys, keys, then arguments, as EVALSHA takes them). */
export type DecideCall = (call: readonly (string | number)[]) => Promise<unknown>;

/** Sends one decide, or several as one batch; a batch answers each call's reply or Error in call order. */
export interface DecideCaller {
  (call: readonly (string | number)[]): Promise<unknown>;
  batch(calls: readonly (readonly (string | number)[])[]): Promise<unknown[]>;
}

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
 * cannot load functions; a batch then goes as its calls, one EVALSHA each (pipelined by the client).
 */
export function decideCaller(redis: ScriptedRedis, options: { functions?: boolean; script?: DecideScript } = {}): DecideCaller {
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
      if (!/function not found/i.test(errorMessage(error))) throw error;
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

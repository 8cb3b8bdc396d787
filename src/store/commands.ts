// The scripts in lua/ as commands of an ioredis client: each registered with defineCommand, so ioredis sends
// EVALSHA and falls back to EVAL on NOSCRIPT. The typed calls (decide-calls.ts, gossip-calls.ts, ...) send
// them; nothing else calls a script by name.
import type { Cluster, Redis } from 'ioredis';
import { scriptSource } from './lua-source.ts';

/** Every script: its command name on the client and its file in lua/ (without .lua). */
export const SCRIPTS = {
  decide: 'decide',
  decideSingleRegion: 'decide_single',
  applyGossip: 'apply_gossip',
  takePending: 'take_pending',
  takeFast: 'take_fast',
  ackPending: 'ack_pending',
  releaseLeases: 'release_leases',
  refund: 'refund',
  settleFallback: 'settle_fallback',
  screenGossip: 'screen_gossip',
  drainBells: 'drain_bells',
  replayCheck: 'replay_check',
  replayRecord: 'replay_record',
  sweepWatch: 'sweep_watch',
  renewLock: 'renew_lock',
  releaseLock: 'release_lock',
  resetKey: 'reset_key',
} as const;

/** A script's command name (a key of SCRIPTS). */
export type ScriptName = keyof typeof SCRIPTS;

const sources = new Map<ScriptName, string>();

/** The source of a script with its includes expanded, read once per process. */
export function luaSource(name: ScriptName): string {
  let source = sources.get(name);
  if (source === undefined) {
    source = scriptSource(SCRIPTS[name]);
    sources.set(name, source);
  }
  return source;
}

/** A registered script: numkeys, then the keys, then the arguments; the reply as the script answers it. */
export type ScriptCommand = (numKeys: number, ...args: (string | number)[]) => Promise<unknown>;

/** The commands withScripts adds to a client, one per script. */
export type QuotafedCommands = Record<ScriptName, ScriptCommand>;

/** A client with every script registered (withScripts). */
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
  if (registered === undefined) {
    registered = new Set();
    definedOn.set(redis, registered);
  }
  if (!registered.has(name)) {
    redis.defineCommand(name, { lua: luaSource(name) });
    registered.add(name);
  }
  return redis as (Redis | Cluster) & Pick<QuotafedCommands, N>;
}

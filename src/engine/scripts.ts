// Loads the Lua scripts in lua/ once, resolves their `--- @include "includes/<name>"` lines (BullMQ's
// convention) and registers them with ioredis, which sends EVALSHA and falls back to EVAL on NOSCRIPT.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';

const LUA_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'lua');

export const SCRIPTS = {
  decide: 'decide',
  applyGossip: 'apply_gossip',
  takePending: 'take_pending',
  ackPending: 'ack_pending',
  releaseLeases: 'release_leases',
  refund: 'refund',
  sweepWatch: 'sweep_watch',
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
  sweepWatch(numKeys: number, ...args: (string | number)[]): Promise<Reply>;
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

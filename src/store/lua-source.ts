// Reads the Lua files in lua/ and expands their `--- @include "includes/<name>"` lines (BullMQ's convention):
// each include once per script, in the order first met, so a shared part is defined once above its users.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LUA_DIR } from '../paths.ts';

const INCLUDE = /^--- @include "([^"]+)"\s*$/gm;

/**
 * The full source of `lua/<file>.lua` with its includes expanded (each include once, in order).
 *
 * @example scriptSource('decide') // lua/decide.lua with includes/clock.lua, includes/federation.lua, ... inlined
 */
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

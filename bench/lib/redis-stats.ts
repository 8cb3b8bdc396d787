// Reading Redis's own counters: INFO commandstats (calls per command), INFO memory and INFO stats.
import type { Redis } from 'ioredis';

export type CommandCalls = Record<string, number>;

export async function commandCalls(redis: Redis): Promise<CommandCalls> {
  const text = await redis.info('commandstats');
  const calls: CommandCalls = {};
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1]!] = Number(match[2]);
  return calls;
}

/** Microseconds Redis spent inside each command so far (INFO commandstats usec; a script's inner calls count in it too). */
export async function commandMicros(redis: Redis): Promise<CommandCalls> {
  const text = await redis.info('commandstats');
  const micros: CommandCalls = {};
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)) micros[match[1]!] = Number(match[2]);
  return micros;
}

/** Microseconds Redis spent in scripts (EVAL/EVALSHA/FCALL, including the commands they call) so far. */
export async function scriptMicros(redis: Redis): Promise<number> {
  const text = await redis.info('commandstats');
  let total = 0;
  for (const match of text.matchAll(/^cmdstat_(?:eval|evalsha|fcall):calls=\d+,usec=(\d+)/gm)) total += Number(match[1]);
  return total;
}

/** Calls per command between two snapshots, without the INFO/CONFIG calls the bench itself makes. */
export function callsDelta(before: CommandCalls, after: CommandCalls): CommandCalls {
  const delta: CommandCalls = {};
  for (const [name, count] of Object.entries(after)) {
    if (
      name === 'info' ||
      name === 'config|resetstat' ||
      name === 'config' ||
      name === 'memory|usage' ||
      name === 'client|setname' ||
      name === 'client'
    )
      continue;
    const diff = count - (before[name] ?? 0);
    if (diff > 0) delta[name] = diff;
  }
  return delta;
}

export function totalCalls(delta: CommandCalls): number {
  return Object.values(delta).reduce((sum, count) => sum + count, 0);
}

export async function infoField(redis: Redis, section: string, field: string): Promise<number> {
  const text = await redis.info(section);
  const match = new RegExp(`^${field}:(\\d+)`, 'm').exec(text);
  if (!match) throw new Error(`INFO ${section} has no ${field}`);
  return Number(match[1]);
}

export const usedMemory = (redis: Redis) => infoField(redis, 'memory', 'used_memory');

export async function netBytes(redis: Redis): Promise<{ input: number; output: number }> {
  const text = await redis.info('stats');
  const read = (field: string) => Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { input: read('total_net_input_bytes'), output: read('total_net_output_bytes') };
}

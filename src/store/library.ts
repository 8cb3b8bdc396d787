// The decide scripts and apply_gossip.lua as Redis Functions libraries, built from lua/functions/*.lua: the
// includes' functions are created once at FUNCTION LOAD instead of on every EVALSHA. A library's names carry a
// hash of its source.
import { createHash } from 'node:crypto';
import { scriptSource } from './lua-source.ts';

/** The decide scripts: decide.lua (every rule shape, federated or not) and decide_single.lua (one region). */
export type DecideScriptName = 'decide' | 'decideSingleRegion';

/** Each decide script's library file in lua/ (without .lua). */
const LIBRARY_FILES: Record<DecideScriptName, string> = {
  decide: 'functions/decide',
  decideSingleRegion: 'functions/decide_single',
};

/** What a library file writes where its source hash goes. */
const HASH_MARK = '{hash}';

/** A decide library, ready for FUNCTION LOAD. */
export interface DecideLibrary {
  /** The library's source (`#!lua name=...` first). */
  source: string;
  /** Its name, for FUNCTION LIST and FUNCTION DELETE. */
  library: string;
  /** The function that takes one decide call (the script's KEYS and ARGV). */
  fn: string;
  /** The function that decides several calls in order in one FCALL (decideBatchArgs lays out its call). */
  batchFn: string;
}

function named(file: string, source: string, pattern: RegExp): string {
  const name = pattern.exec(source)?.[1];
  if (name === undefined) throw new Error(`lua/${file}.lua lost its line ${pattern.source}`);
  return name;
}

const libraries = new Map<DecideScriptName, DecideLibrary>();

/** A library file's source ready for FUNCTION LOAD: includes expanded, {hash} replaced by a hash of the source. */
function librarySource(file: string): string {
  const template = scriptSource(file);
  const hash = createHash('sha1').update(template).digest('hex').slice(0, 12);
  return template.replaceAll(HASH_MARK, hash);
}

/** The gossip library (lua/functions/gossip.lua): apply_gossip.lua, the whole job, sweep_watch.lua. */
export interface GossipLibrary {
  source: string;
  library: string;
  /** The function that takes one apply_gossip.lua call (the script's KEYS and ARGV). */
  applyFn: string;
  /** The function that applies one whole gossip job (includes/apply_job.lua; gossip-calls.ts applyJobCall). */
  jobFn: string;
  /** The function that takes one sweep_watch.lua call (the script's KEYS and ARGV). */
  sweepFn: string;
}

let gossip: GossipLibrary | undefined;

/**
 * apply_gossip.lua and sweep_watch.lua as a Redis Functions library: `applyFn` and `sweepFn` answer exactly what
 * the scripts answer, `jobFn` applies a whole job. Built once per process.
 *
 * @example
 * const { source, applyFn } = gossipLibrary();
 * await redis.call('FUNCTION', 'LOAD', source);
 * await redis.fcall(applyFn, ...applyGossipCall(keys, topology, rule, budget, sender, entry).flat());
 */
export function gossipLibrary(): GossipLibrary {
  if (gossip !== undefined) return gossip;
  const file = 'functions/gossip';
  const source = librarySource(file);
  gossip = {
    source,
    library: named(file, source, /^#!lua name=(\S+)/),
    applyFn: named(file, source, /^redis\.register_function\('([^']+)', apply\)$/m),
    jobFn: named(file, source, /^redis\.register_function\('([^']+)', apply_job\)$/m),
    sweepFn: named(file, source, /^redis\.register_function\('([^']+)', sweep\)$/m),
  };
  return gossip;
}

/**
 * A decide script as a Redis Functions library: `fn` answers exactly what the script answers, `batchFn`
 * decides several calls in order, each exactly as `fn` would. The names carry a hash of the source, so two
 * quotafed versions sharing a Redis each call their own code. Built once per process.
 *
 * @example
 * const { source, fn } = decideLibrary('decideSingleRegion');
 * await redis.call('FUNCTION', 'LOAD', source);
 * await redis.fcall(fn, ...decideCall(input));
 */
export function decideLibrary(name: DecideScriptName = 'decide'): DecideLibrary {
  let built = libraries.get(name);
  if (built !== undefined) return built;
  const file = LIBRARY_FILES[name];
  const source = librarySource(file);
  built = {
    source,
    library: named(file, source, /^#!lua name=(\S+)/),
    fn: named(file, source, /^redis\.register_function\('([^']+)', decide\)$/m),
    batchFn: named(file, source, /^redis\.register_function\('([^']+)', decide_batch\)$/m),
  };
  libraries.set(name, built);
  return built;
}

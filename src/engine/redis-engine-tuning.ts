// Knobs of the Redis engine that only benchmarks and equivalence tests turn: each switches one optimisation
// off to compare it with the plain path. The defaults are the fast paths, with the same answers and state, so
// the public options (RedisEngineOptions) leave them out; createTunedRedisEngine takes them.
import type { DecideBatcherOptions } from './decide-batcher.ts';

export interface RedisEngineTuning {
  /** Decide through a Redis Functions library (default) or EVALSHA of decide.lua (same answers). */
  redisFunctions?: boolean;
  /**
   * The decisions of one turn of the event loop go together in one call (or two, with at most two in flight),
   * decided in order (default on; decide-batcher.ts). `false` sends every decision as its own call.
   */
  batch?: boolean | DecideBatcherOptions;
  /**
   * A config that does not federate (one region) decides through decide_single.lua, which has no federation
   * cells or rebalancing (default on; same answers and state). `false` uses decide.lua.
   */
  singleRegionScript?: boolean;
}

// The decision engine: matching a request to rules, the Redis client and the Lua scripts, one atomic decision per
// request in the region's Redis, and the resilient wrapper (deadline, breaker, fail modes, local fallback). What the
// rest of quotafed and library users import from it is exported here.
export { createRedisEngine, bindingOutcome, type RedisEngineOptions } from './redis-engine.ts';
export { ALGORITHM_CODES } from '../store/script-call.ts';
export { createRegionRedis, waitReady, type RegionRedis } from '../store/client.ts';
export { matchRules } from './rules.ts';
export { StoreUnavailableError } from './errors.ts';
export type { Decision, DecisionEngine, DecisionSource, Lease, MatchedRule, RequestContext, RuleOutcome } from './types.ts';

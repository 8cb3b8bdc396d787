export { createRedisEngine, bindingOutcome, ALGORITHM_CODES, type RedisEngineOptions } from './redis-engine.ts';
export { createRegionRedis, waitReady, type RegionRedis } from './redis-client.ts';
export { matchRules, type MatchedRule } from './rules.ts';
export { StoreUnavailableError, BadRequestError } from './errors.ts';
export type { Decision, DecisionEngine, DecisionSource, Lease, RequestContext, RuleOutcome } from './types.ts';

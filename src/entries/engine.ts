// `quotafed/engine`: the decision engine and the region config, for code that builds its own engine (for the
// Hono middleware or another framework) without the regional service. Loads no HTTP server, gRPC or BullMQ.
export { createRedisEngine } from '../engine/redis-engine.ts';
export { createRegionRedis } from '../store/client.ts';
export { matchRules } from '../engine/rules.ts';
export { StoreUnavailableError } from '../engine/errors.ts';
export type { Decision, DecisionEngine, Lease, RequestContext, RuleOutcome } from '../engine/types.ts';
export { createResilientEngine, type ResilientEngine } from '../engine/resilient.ts';
export { parseConfig, loadConfigFile, ConfigError } from '../config/load.ts';
export { Config as ConfigSchema, type Config, type ConfigInput, type Rule } from '../config/schema.ts';

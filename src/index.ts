// Public API of the quotafed package.
export { createLimiter, type Limiter, type LimiterOptions, type LimitResult } from './limiter.ts';
export { tokenBucket, fixedWindow, slidingWindow, slidingLog, concurrency, type AlgorithmSpec, type Period } from './algorithms.ts';
export { createRedisEngine, createRegionRedis, matchRules, StoreUnavailableError } from './engine/index.ts';
export type { Decision, DecisionEngine, Lease, RequestContext, RuleOutcome } from './engine/index.ts';
export { parseConfig, loadConfigFile, ConfigError } from './config/load.ts';
export { Config as ConfigSchema, type Config, type ConfigInput, type Rule } from './config/schema.ts';
export { quotafed, type QuotafedOptions } from './http/middleware.ts';
export type { QuotafedEnv } from './http/env.ts';
export type { AdminRoutes } from './http/admin.ts';
export { createRegionEngine, startRegionService, type RegionService, type RegionServiceOptions } from './service.ts';
export { createResilientEngine, type ResilientEngine } from './engine/resilient.ts';
export { registerDefaultMetrics, registry } from './metrics.ts';

// The package's main entry, `quotafed`: the library. A limiter on your own Redis in a few lines, the algorithms as
// values, and the metrics registry. It loads neither the HTTP service, gRPC nor BullMQ; the other audiences have
// their own entries: `quotafed/engine` (the decision engine and the region config), `quotafed/hono` (the
// middleware) and `quotafed/service` (the regional service).
export { createLimiter, type Limiter, type LimiterOptions, type LimitResult } from './limiter.ts';
export { tokenBucket, fixedWindow, slidingWindow, slidingLog, concurrency, type AlgorithmSpec, type Period } from './algorithms.ts';
export type { Decision, Lease, RuleOutcome } from './engine/types.ts';
export { registerDefaultMetrics, registry } from './metrics.ts';
export { tuneV8 } from './v8-tuning.ts';

// The config sections of what a region reports about itself: the heavy-hitters sketch of the keys being limited
// (`topKeys`, docs/top-keys-and-tracing.md), OpenTelemetry tracing of decisions (`tracing`) and Node's process
// metrics (`metrics`).
import { z } from 'zod';

/** `topKeys`: the per-rule heavy-hitters sketch behind GET /admin/keys/top, the dashboard's table and the top-N gauges. */
export const TopKeysSettings = z.strictObject({
  /** Keep the sketches (one per rule for denials, one for consumption). */
  enabled: z.boolean().default(true),
  /** Counters per rule and per measure (space-saving): every key above 1/capacity of the window's total is held. */
  capacity: z.number().int().min(8).max(10_000).default(256),
  /** Keys per rule exported as quotafed_top_key_denials / quotafed_top_key_consumption (0: none). */
  metricsTopN: z.number().int().min(0).max(100).default(10),
  /** How API keys are shown: `masked` (the first 4 characters and the key's identity hash) or `plain`. */
  apiKeys: z.enum(['masked', 'plain']).default('masked'),
});
export type TopKeysSettings = z.infer<typeof TopKeysSettings>;

/** `tracing`: OpenTelemetry spans of decisions, exported over OTLP/HTTP; off unless an endpoint is known. */
export const TracingSettings = z.strictObject({
  /** false turns tracing off even when OTEL_EXPORTER_OTLP_ENDPOINT is set. */
  enabled: z.boolean().default(true),
  /** The collector's OTLP/HTTP base URL (`http://collector:4318`; `/v1/traces` is appended unless given). */
  otlpEndpoint: z.url().optional(),
  /** service.name of the spans; OTEL_SERVICE_NAME or "quotafed" when omitted. */
  serviceName: z.string().min(1).max(256).optional(),
  /** Share of decisions traced, 0 to 1. */
  sampleRatio: z.number().min(0).max(1).default(1),
  /** Extra HTTP headers on every export (a collector's API key). */
  headers: z.record(z.string(), z.string()).default({}),
});
export type TracingSettings = z.infer<typeof TracingSettings>;

/**
 * How often the event-loop lag metrics sample by default (ms). The sampling is a timer on the event loop, so an idle
 * process wakes this often: prom-client's own default of 10 ms is 100 wake-ups a second, about 6 ms of CPU a second
 * on the 2-core machine the benches run on, in every idle gateway and federated region.
 */
export const EVENT_LOOP_RESOLUTION_MS = 100;

/** `metrics`: Node's process metrics (quotafed_process_*, quotafed_nodejs_*) the service registers. */
export const MetricsSettings = z.strictObject({
  /**
   * The event-loop lag's sampling interval (quotafed_nodejs_eventloop_lag_*): each sample is how late a timer of this
   * interval fired, so a block shorter than it is seen only when a sample falls inside it (10 is prom-client's default).
   */
  eventLoopResolutionMs: z.number().int().min(1).max(1_000).default(EVENT_LOOP_RESOLUTION_MS),
});
export type MetricsSettings = z.infer<typeof MetricsSettings>;

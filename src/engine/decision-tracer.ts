// What the resilient engine hands a tracer after each decision. No OpenTelemetry here: the engine only knows this
// interface, and the OpenTelemetry implementation (otel-tracer.ts) is imported on demand by tracing.ts, so with
// tracing off no @opentelemetry package is ever loaded and a decision pays nothing for it.
import type { DecisionSource } from './types.ts';

/** One decision as a span: when it ran, which rules decided it, its outcome, and how long Redis took. */
export interface DecisionSpan {
  /** Epoch milliseconds (fractional) at the start and the end of the decision. */
  startMs: number;
  endMs: number;
  region: string;
  /** Every rule the request matched, in config order. */
  rules: string[];
  /** The rules that denied it (shadow rules included). */
  deniedRules: string[];
  outcome: 'allowed' | 'denied';
  /** The rule that drives the headers, if any. */
  binding: string | undefined;
  /** Who decided the binding rule; "none" when no rule matched. */
  source: DecisionSource | 'none';
  /** Time spent waiting on Redis (every round trip of the decision, grant waits included), ms. */
  redisMs: number;
  /** The route pattern the decision was counted under. */
  endpoint: string;
  cost: number;
}

/**
 * Receives a span per decision; `shutdown` exports what is buffered.
 *
 * @example
 * ```ts
 * const spans: DecisionSpan[] = [];
 * const tracer: DecisionTracer = { decided: (span) => void spans.push(span), shutdown: async () => {} };
 * const engine = createResilientEngine({ config, inner, probe, logger, tracer });
 * ```
 */
export interface DecisionTracer {
  decided(span: DecisionSpan): void;
  shutdown(): Promise<void>;
}

/** Where and how spans are exported. */
export interface TracingTarget {
  /** The full OTLP/HTTP traces URL (…/v1/traces). */
  tracesUrl: string;
  serviceName: string;
  sampleRatio: number;
  headers: Record<string, string>;
  region: string;
}

// The OpenTelemetry decision tracer: a span per sampled decision, batched and exported over OTLP/HTTP (JSON) by a
// tracer provider of its own (the global one, an embedding app's, is left alone). Imported only by tracing.ts, on
// demand: nothing else may import an @opentelemetry package (.dependency-cruiser.cjs).
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { DecisionSpan, DecisionTracer, TracingTarget } from './decision-tracer.ts';

/** The span's name. */
export const DECISION_SPAN = 'quotafed.decide';

/**
 * A DecisionTracer exporting to `target.tracesUrl`; each decision is sampled with probability `sampleRatio` (there is
 * no parent span to follow, so sampling before building the span is the trace-id ratio's equivalent, and cheaper).
 *
 * @example
 * ```ts
 * const tracer = createOtelTracer({ tracesUrl: 'http://127.0.0.1:4318/v1/traces', serviceName: 'quotafed', sampleRatio: 1, headers: {}, region: 'us-east' });
 * ```
 */
export function createOtelTracer(target: TracingTarget): DecisionTracer {
  const exporter = new OTLPTraceExporter({ url: target.tracesUrl, headers: target.headers });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': target.serviceName, 'quotafed.region': target.region }),
    sampler: new AlwaysOnSampler(),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('quotafed');
  const { sampleRatio } = target;
  return {
    decided(span: DecisionSpan) {
      if (sampleRatio < 1 && Math.random() >= sampleRatio) return;
      const otelSpan = tracer.startSpan(DECISION_SPAN, {
        kind: SpanKind.INTERNAL,
        startTime: span.startMs,
        attributes: {
          'quotafed.region': span.region,
          'quotafed.rules': span.rules,
          'quotafed.denied_rules': span.deniedRules,
          'quotafed.outcome': span.outcome,
          'quotafed.source': span.source,
          'quotafed.redis.duration_ms': span.redisMs,
          'quotafed.endpoint': span.endpoint,
          'quotafed.cost': span.cost,
          ...(span.binding === undefined ? {} : { 'quotafed.rule': span.binding }),
        },
      });
      otelSpan.setStatus({ code: SpanStatusCode.OK });
      otelSpan.end(span.endMs);
    },
    shutdown: () => provider.shutdown(),
  };
}

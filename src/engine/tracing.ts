// Whether decisions are traced, and the tracer when they are. The config's `tracing` section or the standard
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT variables turn it on; OTEL_SDK_DISABLED=true or
// `tracing.enabled: false` keep it off. Only then is the OpenTelemetry SDK imported (dynamically).
import type { Config } from '../config/schema.ts';
import type { DecisionTracer, TracingTarget } from './decision-tracer.ts';

const TRACES_PATH = '/v1/traces';

function tracesUrlOf(base: string): string {
  const trimmed = base.replace(/\/+$/, '');
  return trimmed.endsWith(TRACES_PATH) ? trimmed : `${trimmed}${TRACES_PATH}`;
}

/**
 * The export target, or undefined when tracing is off (the default: no endpoint configured).
 *
 * @example
 * ```ts
 * tracingTarget(config, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })?.tracesUrl; // 'http://collector:4318/v1/traces'
 * ```
 */
export function tracingTarget(config: Pick<Config, 'region' | 'tracing'>, env: NodeJS.ProcessEnv = process.env): TracingTarget | undefined {
  const settings = config.tracing;
  if (settings?.enabled === false || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const configured = settings?.otlpEndpoint;
  const fromEnv = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || undefined;
  const baseFromEnv = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || undefined;
  const tracesUrl = configured ? tracesUrlOf(configured) : (fromEnv ?? (baseFromEnv ? tracesUrlOf(baseFromEnv) : undefined));
  if (tracesUrl === undefined) return undefined;
  return {
    tracesUrl,
    serviceName: settings?.serviceName ?? (env.OTEL_SERVICE_NAME?.trim() || 'quotafed'),
    sampleRatio: settings?.sampleRatio ?? 1,
    headers: settings?.headers ?? {},
    region: config.region,
  };
}

/**
 * The decision tracer for `config`, or undefined when tracing is off; loads the OpenTelemetry SDK only when on.
 *
 * @example
 * ```ts
 * const tracer = await startTracing(config);
 * const engine = createResilientEngine({ config, inner, probe, logger, tracer });
 * // at shutdown: await tracer?.shutdown();
 * ```
 */
export async function startTracing(
  config: Pick<Config, 'region' | 'tracing'>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<DecisionTracer | undefined> {
  const target = tracingTarget(config, env);
  if (target === undefined) return undefined;
  const { createOtelTracer } = await import('./otel-tracer.ts');
  return createOtelTracer(target);
}

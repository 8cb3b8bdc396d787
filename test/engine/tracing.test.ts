// OpenTelemetry spans of decisions, exported to a real OTLP/HTTP collector (a tiny HTTP server in this test) by a
// region service on its own redis-server: the span's name and attributes after /v1/check, the standard
// OTEL_EXPORTER_OTLP_ENDPOINT variable, and tracing off by default without one @opentelemetry module loaded.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { startTracing, tracingTarget } from '../../src/engine/tracing.ts';
import { silentLogger } from '../../src/log.ts';
import { startRegionService } from '../../src/service.ts';
import { client, useRedis } from '../harness/redis.ts';
import { seedConfig } from '../service/fixtures.ts';

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface ExportedSpan {
  name: string;
  service: string | undefined;
  attributes: Record<string, unknown>;
  startNs: bigint;
  endNs: bigint;
}

const valueOf = (value: OtlpValue): unknown =>
  value.arrayValue
    ? (value.arrayValue.values ?? []).map(valueOf)
    : (value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? value.boolValue)));
const attributesOf = (list: OtlpAttribute[] = []) => Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

/** An OTLP/HTTP collector: what it received on /v1/traces, spans flattened. */
async function startCollector(): Promise<{ url: string; spans: ExportedSpan[]; contentTypes: string[]; close(): Promise<void> }> {
  const spans: ExportedSpan[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      contentTypes.push(`${request.method} ${request.url} ${request.headers['content-type']}`);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const resourceSpans of body.resourceSpans ?? []) {
        const resource = attributesOf(resourceSpans.resource?.attributes);
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            spans.push({
              name: span.name,
              service: resource['service.name'] as string | undefined,
              attributes: { ...attributesOf(span.attributes), 'resource.quotafed.region': resource['quotafed.region'] },
              startNs: BigInt(span.startTimeUnixNano),
              endNs: BigInt(span.endTimeUnixNano),
            });
          }
        }
      }
      response.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, spans, contentTypes, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('decision tracing', async () => {
  const redis = await useRedis();
  let collector: Awaited<ReturnType<typeof startCollector>>;
  beforeAll(async () => {
    collector = await startCollector();
  });
  afterAll(() => collector?.close());

  it('exports a span per decision with the rules, the outcome, the Redis time and the region', async () => {
    const service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.tracing = { otlpEndpoint: collector.url, serviceName: 'quotafed-test' };
        raw.rules = [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 1, period: '1h' }];
      }),
      { federation: false, dashboard: false },
    );
    const check = () =>
      fetch(`${service.url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey: 'traced-key', method: 'GET', path: '/items' }) });
    const startedNs = BigInt(Date.now()) * 1_000_000n;
    expect((await check()).status).toBe(200);
    expect((await (await check()).json()).allowed).toBe(false);
    // Shutdown flushes the batch: both spans reach the collector.
    await service.close();
    expect(collector.contentTypes[0]).toMatch(/^POST \/v1\/traces application\/json/);
    const spans = collector.spans.filter((span) => span.name === 'quotafed.decide' && span.service === 'quotafed-test');
    expect(spans).toHaveLength(2);
    const [allowed, denied] = [...spans].sort((a, b) => Number(a.startNs - b.startNs));
    expect(allowed!.attributes).toMatchObject({
      'quotafed.region': 'us-east',
      'resource.quotafed.region': 'us-east',
      'quotafed.rules': ['per-key'],
      'quotafed.denied_rules': [],
      'quotafed.outcome': 'allowed',
      'quotafed.rule': 'per-key',
      'quotafed.source': 'redis',
      'quotafed.endpoint': '(other)',
      'quotafed.cost': 1,
    });
    expect(allowed!.attributes['quotafed.redis.duration_ms']).toBeGreaterThan(0);
    expect(denied!.attributes).toMatchObject({
      'quotafed.outcome': 'denied',
      'quotafed.denied_rules': ['per-key'],
      'quotafed.rules': ['per-key'],
    });
    expect(allowed!.startNs).toBeGreaterThanOrEqual(startedNs - 5_000_000n);
    expect(allowed!.endNs).toBeGreaterThanOrEqual(allowed!.startNs);
  });

  it('follows OTEL_EXPORTER_OTLP_ENDPOINT, samples by sampleRatio, and stays off without an endpoint', async () => {
    const config = parseConfig({
      region: 'eu-west',
      redis: { url: redis.url },
      rules: [{ name: 'env-rule', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1h' }],
    });
    expect(tracingTarget(config, {})).toBeUndefined();
    expect(tracingTarget(config, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })?.tracesUrl).toBe('http://c:4318/v1/traces');
    expect(tracingTarget(config, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom' })?.tracesUrl).toBe('http://c:4318/custom');
    expect(tracingTarget(config, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    const disabled = parseConfig({ ...config, tracing: { enabled: false } } as never);
    expect(tracingTarget(disabled, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBeUndefined();
    expect(tracingTarget(config, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'edge' })?.serviceName).toBe('edge');
    expect(() => parseConfig({ ...config, tracing: { sampleRatio: 2 } } as never)).toThrow(/tracing\.sampleRatio/);
    expect(() => parseConfig({ ...config, tracing: { otlpEndpoint: 'not a url' } } as never)).toThrow(/tracing\.otlpEndpoint/);

    const engineRedis = client(redis.url);
    const decideAll = async (tracerConfig: typeof config, env: NodeJS.ProcessEnv, requests: number) => {
      const tracer = await startTracing(tracerConfig, env);
      expect(tracer).toBeDefined();
      const engine = createResilientEngine({
        config: tracerConfig,
        inner: createRedisEngine({ config: tracerConfig, redis: engineRedis }),
        probe: () => engineRedis.ping(),
        logger: silentLogger(),
        tracer,
      });
      for (let i = 0; i < requests; i++) await engine.decide({ apiKey: `env-${i}`, ip: '10.0.0.1', method: 'GET', path: '/' });
      await engine.close();
      await tracer!.shutdown();
    };
    const before = collector.spans.length;
    await decideAll(config, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'from-env' }, 3);
    expect(collector.spans.slice(before).filter((span) => span.service === 'from-env')).toHaveLength(3);
    const unsampled = parseConfig({ ...config, tracing: { otlpEndpoint: collector.url, sampleRatio: 0, serviceName: 'never' } } as never);
    await decideAll(unsampled, {}, 20);
    expect(collector.spans.filter((span) => span.service === 'never')).toHaveLength(0);
  });

  it('loads no @opentelemetry module when tracing is off, and loads it when on', async () => {
    const probe = async (mode: 'on' | 'off') => {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', 'test/support/tracing-probe.ts', redis.url, mode, collector.url],
        { timeout: 60_000, env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' } },
      );
      return JSON.parse(stdout.trim().split('\n').at(-1)!) as { status: number; loaded: string[] };
    };
    const off = await probe('off');
    expect(off).toEqual({ status: 200, loaded: [] });
    const on = await probe('on');
    expect(on.status).toBe(200);
    expect(on.loaded).toEqual(
      expect.arrayContaining(['@opentelemetry/api', '@opentelemetry/sdk-trace-base', '@opentelemetry/exporter-trace-otlp-http']),
    );
  }, 120_000);
});

// Envoy's RateLimitService v3 over gRPC, driven by a real grpc-js client built from the same .proto
// against a region service on a real redis-server. Allow, deny at the limit, several descriptors where one
// denies, hits_addend, envoyproxy/ratelimit config import (precedence, shadow_mode), unknown domain (OK, or
// OVER_LIMIT when configured), malformed requests (INVALID_ARGUMENT, the server keeps serving), Redis stopped
// with SIGSTOP (each rule's fail mode decides within the client's deadline), the health service and metrics.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRlsClient, type RlsClient } from '../../src/grpc/client.ts';
import type { RateLimitRequestMessage } from '../../src/grpc/messages.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, eventually, metricValue, seedConfig } from '../service/fixtures.ts';

type Raw = Record<string, unknown>;
const HOUR = 3_600_000;

/** Envoy rules written by hand (match.envoy) and an envoyproxy/ratelimit document imported verbatim. */
function envoyRules(raw: Raw, failMode: 'open' | 'closed' = 'open'): void {
  raw.grpc = { port: 0 };
  raw.rules = [
    ...(raw.rules as Raw[]),
    {
      name: 'edge-checkout',
      match: { envoy: { domain: 'edge', descriptor: [{ key: 'generic_key', value: 'checkout' }, { key: 'api_key' }] } },
      algorithm: 'fixedWindow',
      limit: 3,
      period: '1h',
      failMode,
    },
    {
      name: 'edge-tenant',
      match: { envoy: { domain: 'edge', descriptor: [{ key: 'tenant' }] } },
      algorithm: 'fixedWindow',
      limit: 10,
      period: '1h',
      failMode: 'closed',
    },
  ];
  raw.envoy = {
    configs: [
      {
        domain: 'imported',
        descriptors: [
          { key: 'remote_address', rate_limit: { unit: 'hour', requests_per_unit: 100 } },
          { key: 'remote_address', value: '10.0.0.9', rate_limit: { unit: 'hour', requests_per_unit: 2 } },
          { key: 'path', value: '/shadow', shadow_mode: true, rate_limit: { unit: 'hour', requests_per_unit: 1 } },
          {
            key: 'authenticated',
            value: 'true',
            descriptors: [{ key: 'client_id', rate_limit: { unit: 'minute', requests_per_unit: 5 } }],
          },
        ],
      },
    ],
  };
}

const req = (
  domain: string,
  entries: Array<[string, string]>[],
  extra: Partial<RateLimitRequestMessage> = {},
): RateLimitRequestMessage => ({
  domain,
  descriptors: entries.map((list) => ({ entries: list.map(([key, value]) => ({ key, value })) })),
  ...extra,
});

const header = (response: { response_headers_to_add: Array<{ key: string; value: string }> }, name: string) =>
  response.response_headers_to_add.find((h) => h.key === name)?.value;

describe('Envoy RLS over gRPC', async () => {
  const redis = await useRedis();
  let service: RegionService;
  let strict: RegionService;
  let client: RlsClient;
  let strictClient: RlsClient;

  beforeAll(async () => {
    service = await startRegionService(
      seedConfig(redis.url, (raw) => envoyRules(raw)),
      { dashboard: false },
    );
    strict = await startRegionService(
      seedConfig(redis.url, (raw) => {
        envoyRules(raw);
        raw.grpc = { port: 0, unknownDomain: 'overLimit' };
      }),
      { dashboard: false },
    );
    client = createRlsClient(service.grpcAddress!);
    strictClient = createRlsClient(strict.grpcAddress!);
    await awayFromWindowEdge(HOUR, 10_000);
  });
  afterAll(async () => {
    client?.close();
    strictClient?.close();
    await service?.close();
    await strict?.close();
  });

  it('answers the standard gRPC health check', async () => {
    expect(await client.health()).toBe('SERVING');
    expect(await client.health('envoy.service.ratelimit.v3.RateLimitService')).toBe('SERVING');
    await expect(client.health('no.such.Service')).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    // Watch streams the current status (and NOT_SERVING at shutdown, see the last test).
    const first = await new Promise<unknown>((resolve, reject) => {
      const stream = client.raw.makeServerStreamRequest(
        '/grpc.health.v1.Health/Watch',
        (value: Buffer) => value,
        (value: Buffer) => value,
        Buffer.alloc(0),
      );
      stream.on('data', (data: Buffer) => {
        resolve(data);
        stream.cancel();
      });
      stream.on('error', (error: grpc.ServiceError) => (error.code === grpc.status.CANCELLED ? undefined : reject(error)));
    });
    // HealthCheckResponse{status: SERVING (1)}: field 1, varint 1.
    expect([...(first as Buffer)]).toEqual([0x08, 0x01]);
  });

  it('allows under the limit, denies at it with the status, headers and 429 body Envoy forwards', async () => {
    const call = () =>
      client.shouldRateLimit(
        req('edge', [
          [
            ['generic_key', 'checkout'],
            ['api_key', 'k-allow-deny'],
          ],
        ]),
      );
    const first = await call();
    expect(first.overall_code).toBe('OK');
    expect(first.statuses).toHaveLength(1);
    expect(first.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { name: 'edge-checkout', requests_per_unit: 3, unit: 'HOUR' },
      limit_remaining: 2,
    });
    expect(first.statuses[0]!.duration_until_reset!.seconds).toBeGreaterThan(0);
    expect(first.statuses[0]!.duration_until_reset!.seconds).toBeLessThanOrEqual(3_600);
    expect(header(first, 'x-ratelimit-limit')).toBe('3, 3;w=3600;name="edge-checkout"');
    expect(header(first, 'x-ratelimit-remaining')).toBe('2');
    expect(Number(header(first, 'x-ratelimit-reset'))).toBe(first.statuses[0]!.duration_until_reset!.seconds);
    expect(header(first, 'retry-after')).toBeUndefined();
    expect(first.raw_body.length).toBe(0);

    expect((await call()).statuses[0]!.limit_remaining).toBe(1);
    expect((await call()).statuses[0]!.limit_remaining).toBe(0);
    const denied = await call();
    expect(denied.overall_code).toBe('OVER_LIMIT');
    expect(denied.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0, current_limit: { requests_per_unit: 3 } });
    expect(header(denied, 'x-ratelimit-remaining')).toBe('0');
    expect(Number(header(denied, 'retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Buffer.from(denied.raw_body).toString()).toBe('{"error":"Rate limit exceeded"}');
    expect(header(denied, 'content-type')).toBe('application/json');

    // Another API key has its own counter.
    expect(
      (
        await client.shouldRateLimit(
          req('edge', [
            [
              ['generic_key', 'checkout'],
              ['api_key', 'k-other'],
            ],
          ]),
        )
      ).overall_code,
    ).toBe('OK');
  });

  it('limits on every descriptor of one call: one over its limit makes the call OVER_LIMIT', async () => {
    for (let i = 0; i < 3; i++)
      await client.shouldRateLimit(
        req('edge', [
          [
            ['generic_key', 'checkout'],
            ['api_key', 'k-multi'],
          ],
        ]),
      );
    const response = await client.shouldRateLimit(
      req('edge', [
        [['tenant', 't-multi']],
        [
          ['generic_key', 'checkout'],
          ['api_key', 'k-multi'],
        ],
        [['no_rule', 'x']],
      ]),
    );
    expect(response.overall_code).toBe('OVER_LIMIT');
    expect(response.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT', 'OK']);
    expect(response.statuses[0]).toMatchObject({ current_limit: { name: 'edge-tenant', requests_per_unit: 10 }, limit_remaining: 9 });
    // A descriptor no rule matches: OK without a limit, as envoyproxy/ratelimit answers.
    expect(response.statuses[2]!.current_limit).toBeNull();
    // The headers describe the descriptor that denied.
    expect(header(response, 'x-ratelimit-limit')).toBe('3, 3;w=3600;name="edge-checkout"');
  });

  it('counts hits_addend: the request-level value, and a descriptor-level value that overrides it', async () => {
    const five = await client.shouldRateLimit(req('edge', [[['tenant', 't-hits']]], { hits_addend: 5 }));
    expect(five.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 5 });
    const over = await client.shouldRateLimit({
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'tenant', value: 't-hits' }], hits_addend: { value: 6 } }],
      hits_addend: 1,
    });
    expect(over.overall_code).toBe('OVER_LIMIT');
    const exact = await client.shouldRateLimit(req('edge', [[['tenant', 't-hits']]], { hits_addend: 5 }));
    expect(exact.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
  });

  it('imports envoyproxy/ratelimit YAML: the most specific descriptor wins, nested keys, shadow_mode', async () => {
    const rules = service.config.rules
      .filter((r) => r.match.envoy?.domain === 'imported')
      .map((r) => [r.name, r.algorithm, r.limit, r.period]);
    expect(rules).toEqual([
      ['envoy.imported.remote_address', 'fixedWindow', 100, HOUR],
      ['envoy.imported.remote_address_10.0.0.9', 'fixedWindow', 2, HOUR],
      ['envoy.imported.path_-shadow', 'fixedWindow', 1, HOUR],
      ['envoy.imported.authenticated_true.client_id', 'fixedWindow', 5, 60_000],
    ]);
    const ip = (address: string) => client.shouldRateLimit(req('imported', [[['remote_address', address]]]));
    expect((await ip('10.0.0.9')).statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 2 }, limit_remaining: 1 });
    await ip('10.0.0.9');
    expect((await ip('10.0.0.9')).overall_code).toBe('OVER_LIMIT');
    expect((await ip('10.0.0.10')).statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 100 },
      limit_remaining: 99,
    });

    const nested = await client.shouldRateLimit(
      req('imported', [
        [
          ['authenticated', 'true'],
          ['client_id', 'c1'],
        ],
      ]),
    );
    expect(nested.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 5, unit: 'MINUTE' }, limit_remaining: 4 });
    // Only the parent level: no limit there.
    expect((await client.shouldRateLimit(req('imported', [[['authenticated', 'true']]]))).statuses[0]!.current_limit).toBeNull();

    // shadow_mode: decided and counted, never refused.
    for (let i = 0; i < 3; i++) expect((await client.shouldRateLimit(req('imported', [[['path', '/shadow']]]))).overall_code).toBe('OK');
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(
      await metricValue(metrics, 'quotafed_decisions_total', { rule: 'envoy.imported.path_-shadow', outcome: 'shadow_limited' }),
    ).toBeGreaterThanOrEqual(2);
  });

  it('answers OK for an unknown domain, or OVER_LIMIT when grpc.unknownDomain says so', async () => {
    const ok = await client.shouldRateLimit(req('nobody-configured-this', [[['generic_key', 'x']], [['a', 'b']]]));
    expect(ok.overall_code).toBe('OK');
    expect(ok.statuses).toEqual([
      { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null, quota: null },
      { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null, quota: null },
    ]);
    const refused = await strictClient.shouldRateLimit(req('nobody-configured-this', [[['generic_key', 'x']]]));
    expect(refused.overall_code).toBe('OVER_LIMIT');
    expect(refused.statuses[0]!.code).toBe('OVER_LIMIT');
  });

  it('answers malformed requests INVALID_ARGUMENT with a reason and keeps serving', async () => {
    const cases: Array<[RateLimitRequestMessage, RegExp]> = [
      [{ domain: '', descriptors: [{ entries: [{ key: 'a', value: 'b' }] }] }, /domain/],
      [{ domain: 'edge', descriptors: [] }, /descriptors must not be empty/],
      [{ domain: 'edge', descriptors: [{ entries: [] }] }, /entries must not be empty/],
      [{ domain: 'edge', descriptors: [{ entries: [{ key: '', value: 'b' }] }] }, /key/],
      [{ domain: 'edge', descriptors: [{ entries: [{ key: 'tenant', value: '' }] }] }, /value/],
      [{ domain: 'edge', descriptors: [{ entries: [{ key: 'tenant', value: 'x'.repeat(2_000) }] }] }, /value/],
      [{ domain: 'edge', descriptors: Array.from({ length: 65 }, () => ({ entries: [{ key: 'a', value: 'b' }] })) }, /at most 64/],
      [{ domain: 'edge', descriptors: [{ entries: [{ key: 'tenant', value: 't' }] }], hits_addend: 5_000_000 }, /hits_addend/],
    ];
    for (const [message, reason] of cases) {
      await expect(client.shouldRateLimit(message)).rejects.toMatchObject({
        code: grpc.status.INVALID_ARGUMENT,
        details: expect.stringMatching(reason),
      });
    }
    // Bytes that are not a RateLimitRequest at all (a descriptors field announcing 5 bytes, carrying 1).
    const garbage = await new Promise<grpc.ServiceError | null>((resolve) => {
      client.raw.makeUnaryRequest(
        '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        (value: Buffer) => value,
        (value: Buffer) => value,
        Buffer.from([0x12, 0x05, 0x01]),
        (error) => resolve(error),
      );
    });
    expect(garbage).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(/not a valid protobuf/) });
    expect((await client.shouldRateLimit(req('edge', [[['tenant', 't-after-garbage']]]))).overall_code).toBe('OK');
    expect(await client.health()).toBe('SERVING');
  });

  it('counts gRPC decisions and OVER_LIMIT answers in the same metrics as HTTP decisions', async () => {
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(
      await metricValue(metrics, 'quotafed_decisions_total', {
        rule: 'edge-checkout',
        endpoint: 'envoy:edge',
        outcome: 'limited',
        source: 'redis',
      }),
    ).toBeGreaterThanOrEqual(2);
    expect(await metricValue(metrics, 'quotafed_http_429_total', { endpoint: 'envoy:edge' })).toBeGreaterThanOrEqual(2);
  });
});

describe('Envoy RLS shutdown', async () => {
  const redis = await useRedis();

  it('ends health Watch streams with NOT_SERVING and closes promptly', async () => {
    const service = await startRegionService(
      seedConfig(redis.url, (raw) => envoyRules(raw)),
      { dashboard: false },
    );
    const client = createRlsClient(service.grpcAddress!);
    try {
      const statuses: number[][] = [];
      const ended = new Promise<void>((resolve) => {
        const stream = client.raw.makeServerStreamRequest(
          '/grpc.health.v1.Health/Watch',
          (value: Buffer) => value,
          (value: Buffer) => value,
          Buffer.alloc(0),
        );
        stream.on('data', (data: Buffer) => statuses.push([...data]));
        stream.on('end', resolve);
        stream.on('error', () => resolve());
      });
      await eventually(() => statuses.length === 1, 2_000, 'the first Watch status');
      const started = Date.now();
      await service.close();
      await ended;
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(statuses).toEqual([
        [0x08, 0x01],
        [0x08, 0x02],
      ]);
    } finally {
      client.close();
      await service.close();
    }
  });
});

describe('Envoy RLS when Redis stalls (SIGSTOP)', async () => {
  const redis = await useRedis();
  let service: RegionService;
  let client: RlsClient;
  const COMMAND_TIMEOUT_MS = 100;

  beforeAll(async () => {
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        envoyRules(raw, 'open');
        raw.redis = { url: redis.url, commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: 1_000 };
        raw.breaker = { failureThreshold: 1_000, probeIntervalMs: 100, successThreshold: 1, localFallback: false };
      }),
      { dashboard: false },
    );
    client = createRlsClient(service.grpcAddress!);
    await client.health();
  });
  afterAll(async () => {
    if (redis.pid) process.kill(redis.pid, 'SIGCONT');
    client?.close();
    await service?.close();
  });

  it('decides by each rule fail mode within the caller deadline, and Redis decides again after SIGCONT', async () => {
    const open = () =>
      client.shouldRateLimit(
        req('edge', [
          [
            ['generic_key', 'checkout'],
            ['api_key', 'k-stall'],
          ],
        ]),
        { deadlineMs: 1_500 },
      );
    const closed = () => client.shouldRateLimit(req('edge', [[['tenant', 't-stall']]]), { deadlineMs: 1_500 });
    expect((await open()).overall_code).toBe('OK');
    expect((await closed()).overall_code).toBe('OK');

    process.kill(redis.pid!, 'SIGSTOP');
    try {
      const started = Date.now();
      const failOpen = await open();
      const failClosed = await closed();
      expect(Date.now() - started).toBeLessThan(1_500);
      // failMode open: admitted; failMode closed: over the limit (the engine's deadline, not the client's, ran out).
      expect(failOpen.overall_code).toBe('OK');
      expect(failClosed.overall_code).toBe('OVER_LIMIT');
      expect(Number(header(failClosed, 'retry-after'))).toBeGreaterThanOrEqual(1);
      // A caller whose own deadline is shorter than the decision's gets DEADLINE_EXCEEDED, and nothing breaks.
      await expect(client.shouldRateLimit(req('edge', [[['tenant', 't-stall']]]), { deadlineMs: 20 })).rejects.toMatchObject({
        code: grpc.status.DEADLINE_EXCEEDED,
      });
      const metrics = await (await fetch(`${service.url}/metrics`)).text();
      expect(await metricValue(metrics, 'quotafed_decisions_total', { rule: 'edge-tenant', source: 'fail-closed' })).toBeGreaterThanOrEqual(
        1,
      );
      expect(await metricValue(metrics, 'quotafed_decisions_total', { rule: 'edge-checkout', source: 'fail-open' })).toBeGreaterThanOrEqual(
        1,
      );
    } finally {
      process.kill(redis.pid!, 'SIGCONT');
    }
    let last = await closed();
    for (let i = 0; i < 40 && last.overall_code !== 'OK'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      last = await closed();
    }
    expect(last.overall_code).toBe('OK');
    expect(last.statuses[0]!.limit_remaining).toBeLessThan(10);
  });
});

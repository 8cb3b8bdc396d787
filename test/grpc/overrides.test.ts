// Envoy's per-descriptor limit override (RateLimitDescriptor.limit) and the envoyproxy/ratelimit `unlimited`,
// `replaces` and week/month/year imports, driven by a real grpc-js client against a region service on a real
// redis-server: the override decides with its own limit and unit on a counter of its own (the rule's counter
// is untouched), an unlimited descriptor is OK without counting, a replaced limit decides nothing while its
// replacement matches the same request, and a week unit is a 7-day window.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRlsClient, type RlsClient } from '../../src/grpc/client.ts';
import type { RateLimitRequestMessage } from '../../src/grpc/messages.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, metricValue, seedConfig } from '../service/fixtures.ts';

type Raw = Record<string, unknown>;
type Descriptor = NonNullable<RateLimitRequestMessage['descriptors']>[number];
const HOUR = 3_600_000;

const descriptor = (entries: Array<[string, string]>, limit?: Descriptor['limit']): Descriptor => ({
  entries: entries.map(([key, value]) => ({ key, value })),
  ...(limit ? { limit } : {}),
});

describe('Envoy limit override, unlimited, replaces and long units over gRPC', async () => {
  const redis = await useRedis();
  let service: RegionService;
  let client: RlsClient;

  beforeAll(async () => {
    service = await startRegionService(
      seedConfig(redis.url, (raw: Raw) => {
        raw.grpc = { port: 0 };
        raw.rules = [
          ...(raw.rules as Raw[]),
          {
            name: 'plan',
            match: { envoy: { domain: 'edge', descriptor: [{ key: 'tenant' }] } },
            algorithm: 'fixedWindow',
            limit: 3,
            period: '1h',
          },
        ];
        raw.envoy = {
          configs: [
            {
              domain: 'internal',
              descriptors: [
                { key: 'ldap', rate_limit: { unlimited: true } },
                { key: 'azure', rate_limit: { unit: 'hour', requests_per_unit: 100 } },
                { key: 'azure', value: 'vip', rate_limit: { unlimited: true } },
                { key: 'weekly', rate_limit: { unit: 'week', requests_per_unit: 2 } },
                {
                  key: 'key_1',
                  value: 'value_1',
                  descriptors: [{ key: 'user', rate_limit: { name: 'specific_limit', unit: 'hour', requests_per_unit: 1 } }],
                },
                {
                  key: 'key_2',
                  value: 'value_2',
                  descriptors: [
                    { key: 'user', rate_limit: { replaces: [{ name: 'specific_limit' }], unit: 'hour', requests_per_unit: 3 } },
                  ],
                },
              ],
            },
          ],
        };
      }),
      { dashboard: false },
    );
    client = createRlsClient(service.grpcAddress!);
    await awayFromWindowEdge(HOUR, 10_000);
  });
  afterAll(async () => {
    client?.close();
    await service?.close();
  });

  it('decides a descriptor with its limit override, on a counter apart from the rule', async () => {
    await awayFromWindowEdge(60_000, 5_000);
    const call = (limit?: Descriptor['limit']) =>
      client.shouldRateLimit({ domain: 'edge', descriptors: [descriptor([['tenant', 'acme']], limit)] });
    const override = { requests_per_unit: 5, unit: 'MINUTE' };
    const codes: string[] = [];
    for (let i = 0; i < 6; i++) codes.push((await call(override)).overall_code);
    // 5 per minute, not the rule's 3 per hour.
    expect(codes).toEqual(['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
    const over = await call(override);
    expect(over.statuses[0]).toMatchObject({
      code: 'OVER_LIMIT',
      current_limit: { name: 'plan', requests_per_unit: 5, unit: 'MINUTE' },
      limit_remaining: 0,
    });
    expect(over.statuses[0]!.duration_until_reset!.seconds).toBeLessThanOrEqual(60);
    expect(over.response_headers_to_add.find((h) => h.key === 'x-ratelimit-limit')?.value).toBe('5, 5;w=60;name="plan"');

    // Without the override the rule decides on its own counter, which the overridden calls did not touch.
    const plain = await call();
    expect(plain.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { name: 'plan', requests_per_unit: 3, unit: 'HOUR' },
      limit_remaining: 2,
    });

    // A larger override: its own counter again (the 5/min one is exhausted, this one is not).
    const week = await call({ requests_per_unit: 1000, unit: 'WEEK' });
    expect(week.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 1000, unit: 'WEEK' }, limit_remaining: 999 });
    // An override equal to the rule is the rule: the same counter.
    const same = await call({ requests_per_unit: 3, unit: 'HOUR' });
    expect(same.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 1 });

    // A descriptor no rule matches stays unlimited even with an override (quotafed needs a rule's algorithm).
    const unmatched = await client.shouldRateLimit({ domain: 'edge', descriptors: [descriptor([['nobody', 'x']], override)] });
    expect(unmatched.statuses[0]).toMatchObject({ code: 'OK', current_limit: null });
  });

  it('refuses a malformed override with INVALID_ARGUMENT naming the field', async () => {
    const bad = (limit: Descriptor['limit']) =>
      client.shouldRateLimit({ domain: 'edge', descriptors: [descriptor([['tenant', 'acme']]), descriptor([['tenant', 'b']], limit)] });
    await expect(bad({ requests_per_unit: 0, unit: 'MINUTE' })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: expect.stringContaining('descriptors[1].limit.requests_per_unit'),
    });
    await expect(bad({ requests_per_unit: 5, unit: 'UNKNOWN' })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: expect.stringContaining('descriptors[1].limit.unit'),
    });
  });

  it('answers an unlimited descriptor OK with MaxUint32 remaining, counts nothing, and meters it', async () => {
    for (let i = 0; i < 3; i++) {
      const answer = await client.shouldRateLimit({ domain: 'internal', descriptors: [descriptor([['ldap', 'cn=admin']])] });
      expect(answer.overall_code).toBe('OK');
      expect(answer.statuses[0]).toEqual({
        code: 'OK',
        current_limit: null,
        limit_remaining: 4_294_967_295,
        duration_until_reset: null,
        quota: null,
      });
    }
    // The more specific unlimited value wins over the limited key, as in envoyproxy/ratelimit's tree walk.
    const vip = await client.shouldRateLimit({
      domain: 'internal',
      descriptors: [descriptor([['azure', 'vip']]), descriptor([['azure', 'other']])],
    });
    expect(vip.statuses.map((s) => s.limit_remaining)).toEqual([4_294_967_295, 99]);
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(
      await metricValue(metrics, 'quotafed_unlimited_decisions_total', { rule: 'envoy.internal.ldap', endpoint: 'envoy:internal' }),
    ).toBe(3);
    expect(await metricValue(metrics, 'quotafed_decisions_total', { rule: 'envoy.internal.ldap' })).toBe(0);
  });

  it('drops a replaced limit while its replacement matches the same request (envoyproxy/ratelimit example 7)', async () => {
    const specific = descriptor([
      ['key_1', 'value_1'],
      ['user', 'bk'],
    ]);
    const replacing = descriptor([
      ['key_2', 'value_2'],
      ['user', 'bk'],
    ]);
    // Together: only the replacing limit (3/h) decides; the replaced 1/h neither decides nor counts.
    for (let i = 0; i < 3; i++) {
      const both = await client.shouldRateLimit({ domain: 'internal', descriptors: [specific, replacing] });
      expect(both.overall_code).toBe('OK');
      expect(both.statuses[0]).toMatchObject({ code: 'OK', current_limit: null });
      expect(both.statuses[1]).toMatchObject({ current_limit: { requests_per_unit: 3, unit: 'HOUR' }, limit_remaining: 2 - i });
    }
    expect((await client.shouldRateLimit({ domain: 'internal', descriptors: [specific, replacing] })).overall_code).toBe('OVER_LIMIT');
    // Alone, the replaced limit applies, its counter untouched by the requests above.
    const alone = await client.shouldRateLimit({ domain: 'internal', descriptors: [specific] });
    expect(alone.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 1, unit: 'HOUR' }, limit_remaining: 0 });
  });

  it('imports a week unit as a 7-day window and reports WEEK', async () => {
    const call = () => client.shouldRateLimit({ domain: 'internal', descriptors: [descriptor([['weekly', 'w1']])] });
    const first = await call();
    expect(first.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 2, unit: 'WEEK' }, limit_remaining: 1 });
    // A fixed window aligned as envoyproxy/ratelimit aligns it: now % 7 days.
    const untilReset = 604_800 - (Math.floor(Date.now() / 1000) % 604_800);
    expect(Math.abs(first.statuses[0]!.duration_until_reset!.seconds - untilReset)).toBeLessThanOrEqual(2);
    expect(first.response_headers_to_add.find((h) => h.key === 'x-ratelimit-limit')?.value).toBe(
      '2, 2;w=604800;name="envoy.internal.weekly"',
    );
    await call();
    expect((await call()).overall_code).toBe('OVER_LIMIT');
  });
});

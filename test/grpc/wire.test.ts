// Wire compatibility with Envoy: golden bytes written by hand from the field numbers and wire types of Envoy's
// api/envoy/service/ratelimit/v3/rls.proto (and RateLimitDescriptor, HeaderValue, Duration), decoded and encoded
// with proto/. A renumbered or retyped field in proto/ fails here before a real Envoy would notice.
import { describe, expect, it } from 'vitest';
import { HEALTH_SERVICE, RLS_SERVICE, serviceDefinition } from '../../src/grpc/proto.ts';

const bytes = (...parts: Array<number | string>) =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from([p]))));

describe('rls.proto on the wire', () => {
  const method = serviceDefinition(RLS_SERVICE).ShouldRateLimit!;

  it('decodes a RateLimitRequest as Envoy encodes it', () => {
    // domain (1, string) "edge"; descriptors (2) { entries (1) { key (1) "k", value (2) "v" }, hits_addend (3) UInt64Value{5} };
    // hits_addend (3, varint) 3
    const entry = bytes(0x0a, 1, 'k', 0x12, 1, 'v');
    const descriptor = bytes(0x0a, entry.length, entry.toString('latin1'), 0x1a, 2, 0x08, 5);
    const golden = bytes(0x0a, 4, 'edge', 0x12, descriptor.length, descriptor.toString('latin1'), 0x18, 3);
    expect(method.requestDeserialize(golden)).toMatchObject({
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }], hits_addend: { value: 5 } }],
      hits_addend: 3,
    });
  });

  it("decodes a descriptor's limit override (RateLimitDescriptor.limit, field 2) and its units", () => {
    // descriptors (2) { entries (1) { key "k", value "v" }, limit (2) { requests_per_unit (1) 7, unit (2) <n> } }
    const entry = bytes(0x0a, 1, 'k', 0x12, 1, 'v');
    const decode = (unit: number) => {
      const override = bytes(0x08, 7, 0x10, unit);
      const descriptor = bytes(0x0a, entry.length, entry.toString('latin1'), 0x12, override.length, override.toString('latin1'));
      const golden = bytes(0x0a, 1, 'd', 0x12, descriptor.length, descriptor.toString('latin1'));
      return (method.requestDeserialize(golden) as { descriptors: Array<{ limit: unknown }> }).descriptors[0]!.limit;
    };
    expect([4, 5, 6, 7].map(decode)).toEqual(['DAY', 'MONTH', 'YEAR', 'WEEK'].map((unit) => ({ requests_per_unit: 7, unit })));
    // A status's current_limit unit (2) 7 is WEEK (envoyproxy/ratelimit's number): statuses (2) { code (1) OK,
    // current_limit (2) { requests_per_unit (1) 1, unit (2) 7 } }
    const week = bytes(0x08, 1, 0x12, 8, 0x08, 1, 0x12, 4, 0x08, 1, 0x10, 7);
    expect(method.responseDeserialize(week)).toMatchObject({ statuses: [{ current_limit: { requests_per_unit: 1, unit: 'WEEK' } }] });
  });

  it('encodes a RateLimitResponse as Envoy decodes it', () => {
    // overall_code (1) OVER_LIMIT=2; statuses (2) { code (1) 2, current_limit (2) { requests_per_unit (1) 10,
    // unit (2) MINUTE=2, name (3) "n" }, duration_until_reset (4) { seconds (1) 5 } }; response_headers_to_add (3)
    // { key (1) "a", value (2) "b" }; raw_body (5) "x"
    const limit = bytes(0x08, 10, 0x10, 2, 0x1a, 1, 'n');
    const status = bytes(0x08, 2, 0x12, limit.length, limit.toString('latin1'), 0x22, 2, 0x08, 5);
    const header = bytes(0x0a, 1, 'a', 0x12, 1, 'b');
    const golden = bytes(
      0x08,
      2,
      0x12,
      status.length,
      status.toString('latin1'),
      0x1a,
      header.length,
      header.toString('latin1'),
      0x2a,
      1,
      'x',
    );
    const response = {
      overall_code: 'OVER_LIMIT',
      // (Zeros set explicitly are encoded by protobufjs, which any proto3 decoder accepts; left out here.)
      statuses: [
        { code: 'OVER_LIMIT', current_limit: { name: 'n', requests_per_unit: 10, unit: 'MINUTE' }, duration_until_reset: { seconds: 5 } },
      ],
      response_headers_to_add: [{ key: 'a', value: 'b' }],
      request_headers_to_add: [],
      raw_body: Buffer.from('x'),
    };
    expect([...method.responseSerialize(response)]).toEqual([...golden]);
    // And back: limit_remaining 3 (field 3, varint), quota (5 in a status, 7 overall) decode as messages.
    const withRemaining = bytes(0x08, 1, 0x12, 4, 0x08, 1, 0x18, 3, 0x3a, 2, 0x08, 9);
    expect(method.responseDeserialize(withRemaining)).toMatchObject({
      overall_code: 'OK',
      statuses: [{ code: 'OK', limit_remaining: 3 }],
      quota: { requests: 9 },
    });
  });

  it('speaks grpc.health.v1 (service (1) string in, status (1) enum out)', () => {
    const check = serviceDefinition(HEALTH_SERVICE).Check!;
    expect(check.requestDeserialize(bytes(0x0a, 3, 'abc'))).toEqual({ service: 'abc' });
    expect([...check.responseSerialize({ status: 'SERVING' })]).toEqual([0x08, 0x01]);
  });
});

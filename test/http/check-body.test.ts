// /v1/check's hand-written body check accepts exactly what the zod schema accepts, with the same output; the
// capped body reader answers 413 for oversized bodies with or without a Content-Length.
import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindingOutcome } from '../../src/engine/redis-engine.ts';
import type { Decision, RuleOutcome } from '../../src/engine/types.ts';
import { acceptCheckBody, checkAnswer, checkBodySchema } from '../../src/http/check.ts';
import { rateLimitHeaders, retryAfterSeconds } from '../../src/http/headers.ts';
import { DEFAULT_IDENTITY } from '../../src/http/identity.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { seedConfig } from '../service/fixtures.ts';

const identity = { ...DEFAULT_IDENTITY, maxApiKeyBytes: 12 };
const schema = checkBodySchema(identity);

const field = {
  apiKey: fc.oneof(fc.string({ maxLength: 14 }), fc.string({ unit: 'grapheme', maxLength: 6 }), fc.integer(), fc.constant(null)),
  ip: fc.oneof(fc.constantFrom('10.0.0.1', '::1', '::ffff:10.0.0.1', '999.1.1.1', '', 'x'), fc.string({ maxLength: 4 }), fc.boolean()),
  method: fc.oneof(
    fc.constantFrom('GET', 'get', 'PoSt', 'GE T', '', 'A'.repeat(16), 'A'.repeat(17), 'DELÉTE'),
    fc.string({ maxLength: 5 }),
    fc.integer(),
  ),
  path: fc.oneof(
    fc.constantFrom('/', '/items', '/a?b#c', '/a#b?c', '?x', 'x', `/${'a'.repeat(4095)}`, `/${'a'.repeat(4096)}`),
    fc.string({ maxLength: 8 }).map((s) => `/${s}`),
    fc.string({ maxLength: 6 }),
  ),
  cost: fc.oneof(
    fc.constantFrom(1, 0, -3, 1.5, 1_000_000, 1_000_001, Number.MAX_SAFE_INTEGER),
    fc.integer(),
    fc.double(),
    fc.string({ maxLength: 2 }),
  ),
  tenant: fc.string({ maxLength: 3 }),
};
const body = fc.oneof(
  fc.record(field, { requiredKeys: [] }),
  fc.record({ method: field.method, path: field.path }),
  fc.constantFrom(null, [], [1, 2], 'GET', 7, {}),
);

describe('acceptCheckBody', () => {
  it('accepts exactly what checkBodySchema accepts, with the same output', () => {
    fc.assert(
      fc.property(body, (value) => {
        const parsed = schema.safeParse(value);
        const fast = acceptCheckBody(value, identity);
        if (!parsed.success) {
          expect(fast).toBeUndefined();
        } else {
          expect(fast).toBeDefined();
          // zod leaves absent optional fields out; the hand-written check leaves them undefined.
          expect(JSON.parse(JSON.stringify(fast))).toEqual(JSON.parse(JSON.stringify(parsed.data)));
        }
      }),
      { numRuns: 3_000 },
    );
  });
});

describe('POST /v1/check body size', async () => {
  const redis = await useRedis();
  let service: RegionService;
  beforeAll(async () => {
    service = await startRegionService(seedConfig(redis.url));
  });
  afterAll(async () => {
    await service?.close();
  });

  const chunked = (chunks: string[]) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${service.url}/v1/check`,
        { method: 'POST', headers: { 'Transfer-Encoding': 'chunked', 'Content-Type': 'application/json' } },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      for (const chunk of chunks) req.write(chunk);
      req.end();
    });

  it('refuses a chunked body over 16 KB with 413 and decides a small chunked one', async () => {
    const big = await chunked(['{"method":"GET","path":"/', 'a'.repeat(10_000), 'a'.repeat(10_000), '"}']);
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body)).toEqual({ error: 'Request body too large' });
    const small = await chunked(['{"method":"GET",', '"path":"/x","apiKey":"chunked"}']);
    expect(small.status).toBe(200);
    expect(JSON.parse(small.body)).toMatchObject({ allowed: true, status: 200 });
  });

  it('answers the rate-limit headers and JSON content type on a decided check', async () => {
    const res = await fetch(`${service.url}/v1/check`, {
      method: 'POST',
      body: JSON.stringify({ apiKey: 'headers-key', method: 'GET', path: '/x' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const json = (await res.json()) as { headers: Record<string, string>; allowed: boolean };
    expect(json.allowed).toBe(true);
    for (const [name, value] of Object.entries(json.headers)) expect(res.headers.get(name)).toBe(value);
    expect(res.headers.get('x-ratelimit-limit')).not.toBeNull();
  });
});

describe('checkAnswer', () => {
  // The answer as the handler built it before the template: JSON.stringify of the documented object.
  const reference = (decision: Decision, headers: Record<string, string>, at: number) => {
    const binding = decision.binding;
    return JSON.stringify({
      allowed: decision.allowed,
      status: decision.allowed ? 200 : 429,
      limit: binding?.limit ?? null,
      remaining: binding ? Math.max(0, Math.floor(binding.remaining)) : null,
      reset: headers['X-RateLimit-Reset'] === undefined ? null : Number(headers['X-RateLimit-Reset']),
      retryAfter: !decision.allowed && binding ? retryAfterSeconds(binding, at) : null,
      rule: binding?.rule ?? null,
      headers,
      leases: decision.leases,
      outcomes: decision.outcomes.map((o) => ({
        rule: o.rule,
        algorithm: o.algorithm,
        allowed: o.allowed,
        limit: o.limit,
        remaining: Math.max(0, Math.floor(o.remaining)),
        resetAtMs: o.resetAtMs,
        retryAfterMs: o.retryAfterMs,
        periodMs: o.periodMs,
        shadow: o.shadow,
        source: o.source,
      })),
    });
  };
  const number = fc.oneof(
    fc.integer({ min: -5, max: 2_000_000_000_000 }),
    fc.double({ noNaN: false }),
    fc.constantFrom(0, -0, 1e21, Number.NaN, Infinity),
  );
  const outcome: fc.Arbitrary<RuleOutcome> = fc.record({
    rule: fc.string({ maxLength: 8 }),
    algorithm: fc.constantFrom('tokenBucket', 'fixedWindow', 'slidingWindow', 'slidingLog', 'concurrency'),
    allowed: fc.boolean(),
    limit: number,
    remaining: number,
    resetAtMs: number,
    retryAfterMs: number,
    periodMs: number,
    shadow: fc.boolean(),
    failMode: fc.constantFrom('open', 'closed'),
    source: fc.constantFrom('redis', 'cache', 'fail-open', 'fail-closed', 'local-fallback'),
  }) as fc.Arbitrary<RuleOutcome>;
  const decision: fc.Arbitrary<Decision> = fc
    .record({
      allowed: fc.boolean(),
      outcomes: fc.array(outcome, { maxLength: 3 }),
      leases: fc.array(fc.record({ key: fc.string({ maxLength: 6 }), id: fc.uuid(), slots: fc.integer({ min: 1, max: 5 }) }), {
        maxLength: 2,
      }),
    })
    .map((d) => ({ ...d, binding: bindingOutcome(d.outcomes) }));

  it('writes exactly the headers of rateLimitHeaders and what JSON.stringify of the documented object writes', () => {
    fc.assert(
      fc.property(decision, fc.integer({ min: 0, max: 2_000_000_000_000 }), (d, at) => {
        const headers = rateLimitHeaders(d, at);
        const answer = checkAnswer(d, at);
        expect(answer.headers).toEqual(headers);
        expect(Object.keys(answer.headers)).toEqual(Object.keys(headers));
        expect(answer.json).toBe(reference(d, headers, at));
      }),
      { numRuns: 2_000 },
    );
  });
});

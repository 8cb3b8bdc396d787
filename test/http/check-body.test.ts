// /v1/check's answer is the documented object with the headers of the one header builder; the capped body reader
// answers 413 for oversized bodies with or without a Content-Length.
import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindingOutcome } from '../../src/engine/redis-engine.ts';
import type { Decision, ListVerdict, RuleOutcome } from '../../src/engine/types.ts';
import { checkAnswer } from '../../src/http/check.ts';
import { LIST_DENIED_STATUS, listDeniedReason } from '../../src/http/denial.ts';
import {
  COST_EXCEEDS_LIMIT_STATUS,
  costExceedsLimit,
  costExceedsLimitReason,
  degradedSource,
  rateLimitHeaders,
  regionRemainingOf,
  remainingOf,
} from '../../src/http/headers.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { seedConfig } from '../service/fixtures.ts';

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

type AnswerOptions = NonNullable<Parameters<typeof checkAnswer>[2]>;

describe('checkAnswer', () => {
  // The documented object (README, "POST /v1/check"), built as an object and given to JSON.stringify: what the answer's
  // text must be, byte for byte. remaining and reset are null when nothing was counted (fail-open).
  const reference = (decision: Decision, headers: Record<string, string>, options: AnswerOptions) => {
    const binding = decision.binding;
    const cost = options.cost ?? 1;
    const impossible = costExceedsLimit(decision, cost);
    const degraded = degradedSource(decision);
    const body: Record<string, unknown> = {
      allowed: decision.allowed,
      status: decision.allowed ? 200 : impossible ? COST_EXCEEDS_LIMIT_STATUS : 429,
      limit: binding?.limit ?? null,
      remaining: binding ? (remainingOf(binding) ?? null) : null,
      regionRemaining: binding ? (regionRemainingOf(binding) ?? null) : null,
      reset: headers['X-RateLimit-Reset'] === undefined ? null : Number(headers['X-RateLimit-Reset']),
      retryAfter: headers['Retry-After'] === undefined ? null : Number(headers['Retry-After']),
      rule: binding?.rule ?? null,
      headers,
      leases: decision.leases,
      outcomes: decision.outcomes.map((o) => ({
        rule: o.rule,
        algorithm: o.algorithm,
        allowed: o.allowed,
        limit: o.limit,
        remaining: remainingOf(o) ?? null,
        regionRemaining: regionRemainingOf(o) ?? null,
        resetAtMs: o.resetAtMs,
        retryAfterMs: o.retryAfterMs,
        periodMs: o.periodMs,
        shadow: o.shadow,
        source: o.source,
      })),
    };
    if (degraded) body.degraded = degraded;
    if (options.peek === true) body.consumed = false;
    if (options.settle !== undefined) body.settle = options.settle;
    if (impossible) body.error = costExceedsLimitReason(impossible, cost);
    if (decision.list) {
      body.list = decision.list;
      if (decision.list.list === 'deny') {
        body.status = LIST_DENIED_STATUS;
        body.error = listDeniedReason(decision.list);
      }
    }
    return JSON.stringify(body);
  };
  const number = fc.oneof(
    fc.integer({ min: -5, max: 2_000_000_000_000 }),
    fc.double({ noNaN: false }),
    fc.constantFrom(0, -0, 1e21, Number.NaN, Infinity),
  );
  const outcome: fc.Arbitrary<RuleOutcome> = fc.record(
    {
      rule: fc.string({ maxLength: 8 }),
      algorithm: fc.constantFrom('tokenBucket', 'fixedWindow', 'slidingWindow', 'slidingLog', 'concurrency'),
      allowed: fc.boolean(),
      limit: number,
      remaining: number,
      quotaRemaining: number,
      resetAtMs: number,
      retryAfterMs: number,
      periodMs: number,
      shadow: fc.boolean(),
      failMode: fc.constantFrom('open', 'closed'),
      source: fc.constantFrom('redis', 'cache', 'fail-open', 'fail-closed', 'local-fallback'),
    },
    {
      requiredKeys: [
        'rule',
        'algorithm',
        'allowed',
        'limit',
        'remaining',
        'resetAtMs',
        'retryAfterMs',
        'periodMs',
        'shadow',
        'failMode',
        'source',
      ],
    },
  ) as fc.Arbitrary<RuleOutcome>;
  const list: fc.Arbitrary<ListVerdict> = fc.record({
    list: fc.constantFrom('allow', 'deny'),
    kind: fc.constantFrom('apiKey', 'ip'),
    source: fc.constantFrom('config', 'admin'),
  });
  const decision: fc.Arbitrary<Decision> = fc
    .record({
      allowed: fc.boolean(),
      outcomes: fc.array(outcome, { maxLength: 3 }),
      leases: fc.array(fc.record({ key: fc.string({ maxLength: 6 }), id: fc.uuid(), slots: fc.integer({ min: 1, max: 5 }) }), {
        maxLength: 2,
      }),
      list: fc.option(list, { nil: undefined, freq: 4 }),
    })
    .map(({ list: verdict, ...d }) => ({
      ...d,
      binding: bindingOutcome(d.outcomes),
      // A list decides before any rule (no outcomes), as the engine answers it.
      ...(verdict ? { list: verdict, outcomes: [], binding: undefined, allowed: verdict.list === 'allow' } : {}),
    }));
  const answerOptions: fc.Arbitrary<AnswerOptions> = fc.record(
    {
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 2, max: 2_000 }), fc.double({ min: 1, max: 5_000, noNaN: true })),
      peek: fc.boolean(),
      settle: fc.string({ maxLength: 10 }),
    },
    { requiredKeys: [] },
  );

  it('answers the headers of rateLimitHeaders and the documented object', () => {
    fc.assert(
      fc.property(decision, fc.integer({ min: 0, max: 2_000_000_000_000 }), answerOptions, (d, at, options) => {
        const headers = rateLimitHeaders(d, at);
        if (costExceedsLimit(d, options.cost ?? 1)) delete headers['Retry-After'];
        const answer = checkAnswer(d, at, options);
        expect(answer.headers).toEqual(headers);
        expect(Object.keys(answer.headers)).toEqual(Object.keys(headers));
        expect(answer.json).toBe(reference(d, headers, options));
      }),
      { numRuns: 5_000 },
    );
  });

  it("answers the federation's remaining quota as remaining, and this region's allowance as regionRemaining", () => {
    const federated: RuleOutcome = {
      rule: 'per-key',
      algorithm: 'tokenBucket',
      allowed: true,
      limit: 1_000,
      remaining: 348.3,
      quotaRemaining: 999,
      resetAtMs: 61_000,
      retryAfterMs: 0,
      periodMs: 60_000,
      shadow: false,
      failMode: 'open',
      source: 'redis',
    };
    const body = JSON.parse(checkAnswer({ allowed: true, outcomes: [federated], binding: federated, leases: [] }, 1_000).json);
    expect(body).toMatchObject({ remaining: 999, regionRemaining: 348, outcomes: [{ remaining: 999, regionRemaining: 348 }] });
    const open = { ...federated, source: 'fail-open' as const };
    const degraded = JSON.parse(checkAnswer({ allowed: true, outcomes: [open], binding: open, leases: [] }, 1_000).json);
    expect(degraded).toMatchObject({ remaining: null, regionRemaining: null, degraded: 'fail-open' });
  });
});

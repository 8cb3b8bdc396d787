// The response contract on allowed and rejected gateway responses, against a real Redis and upstream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import { rateLimitHeaders, RATE_LIMITED_BODY } from '../../src/http/headers.ts';
import type { RuleOutcome } from '../../src/engine/types.ts';
import { bindingOutcome } from '../../src/engine/redis-engine.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { awayFromWindowEdge, seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';

const outcome = (over: Partial<RuleOutcome>): RuleOutcome => ({
  rule: 'r',
  algorithm: 'fixedWindow',
  allowed: true,
  limit: 10,
  remaining: 3.7,
  resetAtMs: 10_500,
  retryAfterMs: 0,
  periodMs: 60_000,
  shadow: false,
  failMode: 'open',
  source: 'redis',
  ...over,
});

describe('rateLimitHeaders', () => {
  it('reports whole remaining requests and seconds until reset', () => {
    const headers = rateLimitHeaders({ allowed: true, binding: outcome({}) }, 1_000);
    expect(headers).toEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '3',
      'X-RateLimit-Reset': '10',
      'RateLimit-Policy': '"r";q=10;w=60',
      RateLimit: '"r";r=3;t=10',
    });
  });

  it('never tells a denied client to retry after 0 seconds', () => {
    const headers = rateLimitHeaders(
      { allowed: false, binding: outcome({ allowed: false, remaining: 0, retryAfterMs: 20, resetAtMs: 1_020 }) },
      1_000,
    );
    expect(headers['Retry-After']).toBe('1');
    expect(headers['X-RateLimit-Remaining']).toBe('0');
  });

  it("reports the federation's remaining quota, not this region's allowance, where the engine knows it", () => {
    const federated = outcome({ limit: 1_000, remaining: 348, quotaRemaining: 999 });
    const headers = rateLimitHeaders({ allowed: true, binding: federated, outcomes: [federated] }, 1_000);
    expect(headers['X-RateLimit-Remaining']).toBe('999');
    expect(headers.RateLimit).toBe('"r";r=999;t=10');
    // The binding rule among allowed ones is the one with the least quota remaining.
    const other = outcome({ rule: 'o', limit: 100, remaining: 30, quotaRemaining: 90 });
    const decision = { allowed: true, outcomes: [federated, other], binding: bindingOutcome([federated, other]) };
    expect(rateLimitHeaders(decision, 1_000)['X-RateLimit-Remaining']).toBe('90');
  });

  it('sends no rate-limit headers when no rule applied', () => {
    expect(rateLimitHeaders({ allowed: true, binding: undefined }, 0)).toEqual({});
  });
});

describe('gateway responses', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let service: RegionService;

  beforeAll(async () => {
    upstream = await startUpstream();
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.upstream = { url: upstream.url };
      }),
    );
  });
  afterAll(async () => {
    await service?.close();
    await upstream?.close();
  });

  it('puts the binding rule on allowed responses and the exact 429 contract on the rejected one', async () => {
    await awayFromWindowEdge();
    const headers = { Authorization: 'Bearer key-headers' };
    for (let i = 1; i <= 10; i++) {
      const res = await fetch(`${service.url}/checkout?n=${i}`, { method: 'POST', headers });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ upstream: true, path: `/checkout?n=${i}` });
      expect(res.headers.get('x-upstream')).toBe('yes');
      // /checkout (10/min) binds, not per-key (1,000/min).
      expect(res.headers.get('x-ratelimit-limit')).toBe('10');
      expect(res.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
      const reset = Number(res.headers.get('x-ratelimit-reset'));
      expect(Number.isInteger(reset)).toBe(true);
      expect(reset).toBeGreaterThanOrEqual(0);
      expect(reset).toBeLessThanOrEqual(60);
      // Every matched policy, the binding one first.
      expect(res.headers.get('ratelimit-policy')).toBe('"checkout";q=10;w=60, "per-key";q=1000;w=60');
      expect(res.headers.get('ratelimit')).toMatch(new RegExp(`^"checkout";r=${10 - i};t=${reset}, "per-key";r=\\d+;t=\\d+$`));
      expect(res.headers.get('retry-after')).toBeNull();
    }

    const before = upstream.seen.length;
    const started = Date.now();
    const denied = await fetch(`${service.url}/checkout`, { method: 'POST', headers });
    expect(denied.status).toBe(429);
    expect(await denied.text()).toBe(RATE_LIMITED_BODY);
    expect(RATE_LIMITED_BODY).toBe('{"error":"Rate limit exceeded"}');
    expect(denied.headers.get('content-type')).toBe('application/json');
    expect(denied.headers.get('x-ratelimit-limit')).toBe('10');
    expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
    const retryAfter = denied.headers.get('retry-after')!;
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    // The unit of X-RateLimit-Reset is seconds until the window ends: a fixed 1-minute window ends on the
    // next minute boundary.
    const reset = Number(denied.headers.get('x-ratelimit-reset'));
    const expected = Math.ceil((Math.ceil((started + 1) / 60_000) * 60_000 - started) / 1000);
    expect(Math.abs(reset - expected)).toBeLessThanOrEqual(1);
    expect(Math.abs(Number(retryAfter) - Math.max(1, reset))).toBeLessThanOrEqual(1);
    expect(denied.headers.get('ratelimit')).toMatch(new RegExp(`^"checkout";r=0;t=${reset}, "per-key";r=\\d+;t=\\d+$`));
    expect(upstream.seen.length).toBe(before);
  });

  it('limits anonymous callers per client IP with the same headers', async () => {
    const res = await fetch(`${service.url}/anything`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBe('60');
    expect(res.headers.get('x-ratelimit-remaining')).toBe('59');
    expect(res.headers.get('ratelimit-policy')).toBe('"anonymous";q=60;w=60');
  });
});

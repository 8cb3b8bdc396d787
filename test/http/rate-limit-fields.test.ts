// What the rate-limit fields say, against a real redis-server: every matched policy in RateLimit-Policy, a token
// bucket's refill rate (not its burst) as q, a clear 422 for a cost no rule can ever admit, and a fail-open answer
// (Redis down, nothing counted) that reports no remaining count and says it is degraded.
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ruleLookup } from '../../src/http/headers.ts';
import { quotafed } from '../../src/http/middleware.ts';
import { createRegionEngine, startRegionService, type RegionEngine, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';

const rules = [
  { name: 'bucket', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'tokenBucket', limit: 60, period: '1m', burst: 100 },
  {
    name: 'search',
    match: { identity: 'apiKey', endpoints: ['/search'] },
    by: ['apiKey', 'endpoint'],
    algorithm: 'slidingWindow',
    limit: 5,
    period: '1m',
  },
];

interface CheckReply {
  allowed: boolean;
  status: number;
  remaining: number | null;
  reset: number | null;
  retryAfter: number | null;
  headers: Record<string, string>;
  degraded?: string;
  error?: string;
}

describe('rate-limit fields', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let service: RegionService;
  let region: RegionEngine;

  beforeAll(async () => {
    upstream = await startUpstream();
    const config = seedConfig(redis.url, (raw) => {
      raw.upstream = { url: upstream.url };
      raw.redis = { url: redis.url, commandTimeoutMs: 300, connectTimeoutMs: 500 };
      raw.breaker = { localFallback: false };
      raw.rules = rules;
    });
    service = await startRegionService(config, { federation: false, dashboard: false });
    region = await createRegionEngine(config);
  });
  afterAll(async () => {
    await service?.close();
    await region?.close();
    await upstream?.close();
  });

  const check = async (body: Record<string, unknown>) => {
    const res = await fetch(`${service.url}/v1/check`, { method: 'POST', body: JSON.stringify({ method: 'GET', ...body }) });
    return { res, reply: (await res.json()) as CheckReply };
  };

  it('lists every matched policy, the binding one first, and states a bucket by its refill, not its burst', async () => {
    const { res, reply } = await check({ apiKey: 'fields-a', path: '/search' });
    expect(reply.allowed).toBe(true);
    expect(res.headers.get('x-ratelimit-limit')).toBe('5');
    expect(res.headers.get('ratelimit-policy')).toBe('"search";q=5;w=60, "bucket";q=60;w=60');
    expect(res.headers.get('ratelimit')).toMatch(/^"search";r=4;t=\d+, "bucket";r=99;t=\d+$/);
    expect(res.headers.get('x-ratelimit-degraded')).toBeNull();

    const bucket = await check({ apiKey: 'fields-b', path: '/other' });
    // X-RateLimit-Limit is what the bucket holds (its burst); the policy says the sustained rate: 60 per 60 s.
    expect(bucket.res.headers.get('x-ratelimit-limit')).toBe('100');
    expect(bucket.res.headers.get('ratelimit-policy')).toBe('"bucket";q=60;w=60');
    // Reset: seconds until the bucket is full again (1 token at 1/s), not the 60 s of w.
    expect(bucket.res.headers.get('x-ratelimit-reset')).toBe('1');
  });

  it('answers 422 with the reason, and no Retry-After, for a cost above a rule limit', async () => {
    const bucket = await check({ apiKey: 'fields-c', path: '/other', cost: 101 });
    expect(bucket.reply).toMatchObject({ allowed: false, status: 422, retryAfter: null });
    expect(bucket.reply.error).toBe('cost 101 exceeds the limit 100 of rule "bucket": this request can never be admitted');
    expect(bucket.res.headers.get('retry-after')).toBeNull();
    expect(bucket.reply.headers['Retry-After']).toBeUndefined();

    const search = await check({ apiKey: 'fields-c', path: '/search', cost: 6 });
    expect(search.reply).toMatchObject({ allowed: false, status: 422, retryAfter: null });
    expect(search.reply.error).toMatch(/limit 5 of rule "search"/);

    // A cost that fits the limit but not what is left is an ordinary 429 with Retry-After.
    await check({ apiKey: 'fields-d', path: '/search', cost: 5 });
    const later = await check({ apiKey: 'fields-d', path: '/search', cost: 5 });
    expect(later.reply).toMatchObject({ allowed: false, status: 429 });
    expect(later.reply.retryAfter).toBeGreaterThanOrEqual(1);
  });

  it('answers 422 from the middleware for a cost above a rule limit', async () => {
    const app = new Hono();
    app.use(
      '*',
      quotafed({ engine: region.engine, identify: () => ({ apiKey: 'fields-m', ip: '10.0.0.9', method: 'GET', path: '/x', cost: 500 }) }),
    );
    app.get('/x', (c) => c.text('ok'));
    const res = await app.request('/x');
    expect(res.status).toBe(422);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(((await res.json()) as { error: string }).error).toMatch(/^cost 500 exceeds the limit 100 of rule "bucket"/);
  });

  it('reports no remaining count for a fail-open answer and marks it degraded', async () => {
    await redis.kill('SIGKILL');
    try {
      const { res, reply } = await check({ apiKey: 'fields-e', path: '/search' });
      expect(reply.allowed).toBe(true);
      expect(reply.degraded).toBe('fail-open');
      expect(reply.remaining).toBeNull();
      expect(reply.reset).toBeNull();
      expect(res.headers.get('x-ratelimit-degraded')).toBe('fail-open');
      expect(res.headers.get('x-ratelimit-remaining')).toBeNull();
      expect(res.headers.get('ratelimit')).toBeNull();
      // The policies still hold; only the counts are unknown.
      expect(res.headers.get('ratelimit-policy')).toBe('"search";q=5;w=60, "bucket";q=60;w=60');

      const proxied = await fetch(`${service.url}/search`, { headers: { Authorization: 'Bearer fields-e' } });
      expect(proxied.status).toBe(200);
      await proxied.text();
      expect(proxied.headers.get('x-ratelimit-degraded')).toBe('fail-open');
      expect(proxied.headers.get('x-ratelimit-remaining')).toBeNull();
    } finally {
      await redis.restart();
    }
  });

  it('follows the rules of a lookup as they change', () => {
    let current = [{ name: 'r', algorithm: 'tokenBucket', limit: 1, period: 1_000 }] as never[];
    const lookup = ruleLookup(() => current);
    expect(lookup('r')).toMatchObject({ limit: 1 });
    current = [{ name: 'r', algorithm: 'tokenBucket', limit: 2, period: 1_000 }] as never[];
    expect(lookup('r')).toMatchObject({ limit: 2 });
  });
});

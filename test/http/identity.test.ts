// Identity: API key headers, the anonymous policy (per IP or 401), and X-Forwarded-For only when trusted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import { apiKeyFromHeaders, DEFAULT_IDENTITY } from '../../src/http/identity.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';

describe('apiKeyFromHeaders', () => {
  it('prefers a Bearer token, falls back to X-API-Key, ignores other schemes', () => {
    expect(apiKeyFromHeaders('Bearer abc', 'xyz', DEFAULT_IDENTITY)).toEqual({ ok: true, apiKey: 'abc' });
    expect(apiKeyFromHeaders('bearer   abc  ', undefined, DEFAULT_IDENTITY)).toEqual({ ok: true, apiKey: 'abc' });
    expect(apiKeyFromHeaders('Basic dXNlcjpwdw==', 'xyz', DEFAULT_IDENTITY)).toEqual({ ok: true, apiKey: 'xyz' });
    expect(apiKeyFromHeaders('Bearer ', undefined, DEFAULT_IDENTITY)).toEqual({ ok: true, apiKey: undefined });
    expect(apiKeyFromHeaders(undefined, undefined, { ...DEFAULT_IDENTITY, anonymous: 'reject' })).toMatchObject({ ok: false, status: 401 });
    expect(apiKeyFromHeaders(undefined, 'k'.repeat(513), DEFAULT_IDENTITY)).toMatchObject({ ok: false, status: 400 });
  });
});

describe('identity through the service', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let rejecting: RegionService;
  let trusting: RegionService;
  let direct: RegionService;

  beforeAll(async () => {
    upstream = await startUpstream();
    const anonymousLimit = (raw: Record<string, unknown>) => {
      raw.upstream = { url: upstream.url };
      raw.rules = [{ name: 'anon', match: { identity: 'anonymous' }, by: ['ip'], algorithm: 'fixedWindow', limit: 2, period: '1h' }];
    };
    rejecting = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.upstream = { url: upstream.url };
        raw.identity = { anonymous: 'reject' };
      }),
    );
    trusting = await startRegionService(
      seedConfig(redis.url, (raw) => {
        anonymousLimit(raw);
        raw.region = 'trusting';
        raw.identity = { trustForwardedFor: true };
      }),
    );
    direct = await startRegionService(
      seedConfig(redis.url, (raw) => {
        anonymousLimit(raw);
        raw.rules = [{ ...(raw.rules as object[])[0], name: 'anon-direct' }];
      }),
    );
  });
  afterAll(async () => {
    await Promise.all([rejecting?.close(), trusting?.close(), direct?.close()]);
    await upstream?.close();
  });

  it('answers 401 to anonymous callers when identity.anonymous is reject', async () => {
    const before = upstream.seen.length;
    const res = await fetch(`${rejecting.url}/search`);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: string }).error).toMatch(/API key is required/);
    expect((await fetch(`${rejecting.url}/search`, { headers: { 'X-API-Key': 'someone' } })).status).toBe(200);
    expect(upstream.seen.length).toBe(before + 1);
    const check = await fetch(`${rejecting.url}/v1/check`, { method: 'POST', body: JSON.stringify({ method: 'GET', path: '/search' }) });
    expect(await check.json()).toMatchObject({ allowed: false, status: 401 });
  });

  it('keys anonymous callers by the right-most X-Forwarded-For entry only when trusted', async () => {
    const get = (service: RegionService, forwardedFor: string) =>
      fetch(`${service.url}/page`, { headers: { 'X-Forwarded-For': forwardedFor } }).then((r) => r.status);
    // Trusted: two clients behind the proxy have separate budgets of 2; a spoofed left entry changes nothing.
    expect([
      await get(trusting, '9.9.9.9, 203.0.113.1'),
      await get(trusting, '8.8.8.8, 203.0.113.1'),
      await get(trusting, '203.0.113.1'),
    ]).toEqual([200, 200, 429]);
    expect(await get(trusting, '203.0.113.2')).toBe(200);
    // Not trusted: the header is ignored, every request is the socket's 127.0.0.1.
    expect([await get(direct, '203.0.113.1'), await get(direct, '203.0.113.2'), await get(direct, '203.0.113.3')]).toEqual([200, 200, 429]);
  });
});

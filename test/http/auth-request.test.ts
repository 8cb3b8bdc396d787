// GET /v1/auth (nginx auth_request) without nginx: the statuses auth_request understands (204 / 403 / 401),
// the subrequest headers it needs (400 with a reason otherwise), Traefik's and Caddy's forward-auth headers, X-Real-IP as the client address for IP rules,
// and admin.protectCheck (the admin token in X-Quotafed-Token, since Authorization carries the API key).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, seedConfig } from '../service/fixtures.ts';

const TOKEN = 'auth-request-admin-token';

describe('GET /v1/auth', async () => {
  const redis = await useRedis();
  let open: RegionService;
  let guarded: RegionService;

  beforeAll(async () => {
    open = await startRegionService(seedConfig(redis.url), { dashboard: false });
    guarded = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.admin = { token: TOKEN, protectCheck: true };
        raw.identity = { anonymous: 'reject' };
      }),
      { dashboard: false },
    );
  });
  afterAll(async () => {
    await open?.close();
    await guarded?.close();
  });

  const auth = (service: RegionService, headers: Record<string, string>) => fetch(`${service.url}/v1/auth`, { headers });
  const subrequest = (extra: Record<string, string> = {}) => ({
    'X-Original-URI': '/checkout?q=1',
    'X-Original-Method': 'POST',
    'X-Real-IP': '198.51.100.7',
    ...extra,
  });

  it('answers 204 with the rate-limit headers, then 403 with the 429 body and Retry-After', async () => {
    await awayFromWindowEdge(60_000, 5_000);
    for (let i = 1; i <= 10; i++) {
      const res = await auth(open, subrequest({ Authorization: 'Bearer auth-key' }));
      expect(res.status).toBe(204);
      expect(res.headers.get('x-ratelimit-limit')).toBe('10');
      expect(res.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
    }
    const denied = await auth(open, subrequest({ 'X-API-Key': 'auth-key' }));
    expect(denied.status).toBe(403);
    expect(await denied.text()).toBe('{"error":"Rate limit exceeded"}');
    expect(denied.headers.get('content-type')).toBe('application/json');
    expect(Number(denied.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(denied.headers.get('ratelimit-policy')).toBe('"checkout";q=10;w=60, "per-key";q=1000;w=60');
  });

  it('reads the original request from the forward-auth headers Traefik and Caddy send, and answers their denial 429', async () => {
    await awayFromWindowEdge(60_000, 5_000);
    const forwardAuth = {
      'X-Forwarded-Uri': '/checkout?from=traefik',
      'X-Forwarded-Method': 'POST',
      'X-Real-IP': '198.51.100.10',
      'X-API-Key': 'forward-auth-key',
    };
    for (let i = 1; i <= 10; i++) {
      const res = await auth(open, forwardAuth);
      expect(res.status).toBe(204);
      expect(res.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
    }
    // Traefik and Caddy hand a non-2xx auth answer to the client as it is: the client-facing 429.
    const denied = await auth(open, forwardAuth);
    expect(denied.status).toBe(429);
    expect(await denied.text()).toBe('{"error":"Rate limit exceeded"}');
    expect(Number(denied.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const noMethod = await auth(open, { 'X-Forwarded-Uri': '/x' });
    expect(noMethod.status).toBe(400);
    expect((await noMethod.json()).error).toMatch(/X-Forwarded-Method/);
  });

  it('keys anonymous callers by X-Real-IP', async () => {
    await awayFromWindowEdge(60_000, 5_000);
    const first = await auth(open, subrequest({ 'X-Original-URI': '/anon', 'X-Real-IP': '198.51.100.8' }));
    expect(first.status).toBe(204);
    expect(first.headers.get('x-ratelimit-limit')).toBe('60');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('59');
    expect(
      (await auth(open, subrequest({ 'X-Original-URI': '/anon', 'X-Real-IP': '198.51.100.8' }))).headers.get('x-ratelimit-remaining'),
    ).toBe('58');
    expect(
      (await auth(open, subrequest({ 'X-Original-URI': '/anon', 'X-Real-IP': '198.51.100.9' }))).headers.get('x-ratelimit-remaining'),
    ).toBe('59');
  });

  it('answers 400 with a reason to a request that is not an auth subrequest', async () => {
    expect((await (await auth(open, {})).json()).error).toMatch(/X-Original-URI/);
    const noMethod = await auth(open, { 'X-Original-URI': '/x' });
    expect(noMethod.status).toBe(400);
    expect((await noMethod.json()).error).toMatch(/X-Original-Method/);
    expect((await auth(open, { 'X-Original-URI': 'relative', 'X-Original-Method': 'GET' })).status).toBe(400);
    expect((await fetch(`${open.url}/v1/auth`, { method: 'POST' })).status).toBe(405);
  });

  it('with protectCheck needs the admin token in X-Quotafed-Token; 401 without an API key under anonymous: reject', async () => {
    expect((await auth(guarded, subrequest({ 'X-API-Key': 'guarded-key' }))).status).toBe(400);
    expect((await auth(guarded, subrequest({ 'X-API-Key': 'guarded-key', 'X-Quotafed-Token': 'wrong-token-wrong-token' }))).status).toBe(
      400,
    );
    expect(
      (await auth(guarded, subrequest({ 'X-API-Key': 'guarded-key', 'X-Quotafed-Token': TOKEN, 'X-Original-URI': '/items' }))).status,
    ).toBe(204);
    const anonymous = await auth(guarded, subrequest({ 'X-Quotafed-Token': TOKEN }));
    expect(anonymous.status).toBe(401);
    expect((await anonymous.json()).error).toMatch(/API key is required/);
    const oversized = await auth(guarded, subrequest({ 'X-Quotafed-Token': TOKEN, 'X-API-Key': 'k'.repeat(600) }));
    expect(oversized.status).toBe(401);
  });
});

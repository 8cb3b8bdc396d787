// A rule's own denial (rules[].denial: status, body template, content type) through the gateway, the embedded
// middleware (createRegionEngine, no `rules` handed over: the engine's config supplies them) and forward-auth's
// /v1/auth, on a real redis-server; the rate-limit headers and Retry-After stay as they are, a rule without a
// denial keeps the seed's 429, and /v1/check keeps its JSON decision body.
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quotafed } from '../../src/http/middleware.ts';
import type { QuotafedEnv } from '../../src/http/env.ts';
import { createRegionEngine, startRegionService, type RegionEngine, type RegionService } from '../../src/service.ts';
import { silentLogger } from '../../src/log.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';

const PROBLEM =
  '{"type":"https://example.com/probs/rate-limit","title":"Too many requests","status":{status},' +
  '"detail":"rule {rule}: {limit} per window, {remaining} left, retry in {retryAfter} s","reset":{reset}}';

function withDenials(raw: Record<string, unknown>): void {
  raw.rules = [
    {
      name: 'checkout',
      match: { identity: 'apiKey', endpoints: ['/checkout'] },
      algorithm: 'fixedWindow',
      limit: 2,
      period: '1h',
      denial: { status: 503, contentType: 'application/problem+json', body: PROBLEM },
    },
    { name: 'per-key', match: { identity: 'apiKey' }, algorithm: 'fixedWindow', limit: 3, period: '1h' },
  ];
}

async function spend(send: () => Response | Promise<Response>, times: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < times; i += 1) statuses.push((await send()).status);
  return statuses;
}

function expectProblem(response: Response, body: string, limit: number): void {
  expect(response.status).toBe(503);
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  const retryAfter = Number(response.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(response.headers.get('x-ratelimit-limit')).toBe(String(limit));
  expect(response.headers.get('ratelimit')).toMatch(/^"checkout";r=0;t=\d+/);
  const parsed = JSON.parse(body) as Record<string, unknown>;
  expect(parsed).toEqual({
    type: 'https://example.com/probs/rate-limit',
    title: 'Too many requests',
    status: 503,
    detail: `rule checkout: ${limit} per window, 0 left, retry in ${retryAfter} s`,
    reset: Number(response.headers.get('x-ratelimit-reset')),
  });
}

describe('per-rule custom denial', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let service: RegionService;
  let region: RegionEngine;
  let app: Hono<QuotafedEnv>;

  beforeAll(async () => {
    await awayFromWindowEdge(3_600_000, 10_000);
    upstream = await startUpstream();
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        withDenials(raw);
        raw.upstream = { url: upstream.url };
      }),
      { dashboard: false, federation: false },
    );
    region = await createRegionEngine(seedConfig(redis.url, withDenials), { logger: silentLogger() });
    app = new Hono<QuotafedEnv>();
    app.use(
      '*',
      quotafed({
        engine: region.engine,
        identify: (c) => ({ apiKey: c.req.header('x-user'), ip: '192.0.2.7', method: 'GET', path: c.req.path }),
      }),
    );
    app.all('*', (c) => c.json({ handled: true }));
  });
  afterAll(async () => {
    await region?.close();
    await service?.close();
    await upstream?.close();
  });

  it('the gateway answers the binding rule denial, headers unchanged; the upstream never sees it', async () => {
    const send = () => fetch(`${service.url}/checkout`, { headers: { 'x-api-key': 'gw-1' } });
    expect(await spend(send, 2)).toEqual([200, 200]);
    const seen = upstream.seen.length;
    const denied = await send();
    expectProblem(denied, await denied.text(), 2);
    expect(upstream.seen.length).toBe(seen);
  });

  it('a rule without a denial keeps the seed 429 and body', async () => {
    const send = () => fetch(`${service.url}/items`, { headers: { 'x-api-key': 'gw-2' } });
    expect(await spend(send, 3)).toEqual([200, 200, 200]);
    const denied = await send();
    expect(denied.status).toBe(429);
    expect(denied.headers.get('content-type')).toBe('application/json');
    expect(denied.headers.get('retry-after')).not.toBeNull();
    expect(await denied.text()).toBe('{"error":"Rate limit exceeded"}');
  });

  it('the embedded middleware answers the same denial from the engine config', async () => {
    const send = () => app.request('/checkout', { headers: { 'x-user': 'mw-1' } });
    expect(await spend(send, 2)).toEqual([200, 200]);
    const denied = await send();
    expectProblem(denied, await denied.text(), 2);
  });

  it('/v1/auth: forward-auth gets the denial as it is; nginx gets 403 with the denial body', async () => {
    const auth = (headers: Record<string, string>) => fetch(`${service.url}/v1/auth`, { headers: { 'x-api-key': 'auth-1', ...headers } });
    const forward = { 'x-forwarded-uri': '/checkout', 'x-forwarded-method': 'GET' };
    expect(await spend(() => auth(forward), 2)).toEqual([204, 204]);
    const traefik = await auth(forward);
    expectProblem(traefik, await traefik.text(), 2);
    const nginx = await auth({ 'x-original-uri': '/checkout', 'x-original-method': 'GET' });
    expect(nginx.status).toBe(403);
    expect(nginx.headers.get('content-type')).toBe('application/problem+json');
    expect(JSON.parse(await nginx.text())).toMatchObject({ title: 'Too many requests', status: 503 });
  });

  it('/v1/check keeps its JSON decision body; its status is the denial status', async () => {
    const check = () =>
      fetch(`${service.url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey: 'check-1', method: 'GET', path: '/checkout' }) });
    expect(await spend(check, 2)).toEqual([200, 200]);
    const denied = await check();
    expect(denied.status).toBe(200);
    expect(denied.headers.get('content-type')).toBe('application/json');
    expect(await denied.json()).toMatchObject({ allowed: false, status: 503, rule: 'checkout', remaining: 0 });
    expect(denied.headers.get('retry-after')).not.toBeNull();
  });
});

// nginx auth_request in front of the demo upstream, one quotafed region and a real redis-server, with
// the documented configuration (deploy/nginx/quotafed.conf.template, shown verbatim in docs/nginx.md). Through
// nginx: 1,000 requests per API key then the 1,001st gets 429 with the exact body and headers, and /checkout 10
// per minute. Skipped, saying so, when the nginx binary is absent (CI installs it in .ci/run).
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoUpstream, type DemoUpstream } from '../../src/demo/upstream.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, ruleOf, seedConfig } from '../service/fixtures.ts';
import { NGINX_TEMPLATE_PATH, nginxAvailable, startNginx, type NginxProcess } from '../support/nginx.ts';

const HAVE_NGINX = nginxAvailable();
if (!HAVE_NGINX) console.warn('test/nginx/auth-request.test.ts skipped: no `nginx` binary on PATH (apt-get install nginx)');

const BODY = '{"error":"Rate limit exceeded"}';

describe('the documented nginx config is the template', () => {
  it('docs/nginx.md shows deploy/nginx/quotafed.conf.template verbatim', () => {
    const doc = readFileSync(new URL('../../docs/nginx.md', import.meta.url), 'utf8');
    expect(doc).toContain(readFileSync(NGINX_TEMPLATE_PATH, 'utf8').trimEnd());
  });
});

describe.skipIf(!HAVE_NGINX)('nginx auth_request in front of quotafed', async () => {
  const redis = await useRedis();
  let upstream: DemoUpstream;
  let service: RegionService;
  let nginx: NginxProcess;

  beforeAll(async () => {
    upstream = await startDemoUpstream({ port: 0, region: 'behind-nginx' });
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        // The seed's limits; the per-key bucket refills per day so "1,000 then 429" does not race the refill.
        ruleOf(raw, 'per-key').period = '1d';
        raw.lists = { deny: [{ apiKey: 'nginx-denied' }] };
      }),
      { dashboard: false },
    );
    nginx = await startNginx({ QUOTAFED_ADDR: new URL(service.url).host, API_ADDR: new URL(upstream.url).host });
  });
  afterAll(async () => {
    await nginx?.stop();
    await service?.close();
    await upstream?.close();
  });

  const get = (path: string, apiKey?: string) => fetch(`${nginx.url}${path}`, { headers: apiKey ? { 'X-API-Key': apiKey } : {} });

  it('answers a caller on the deny list 403 with the reason, not the 429', async () => {
    const res = await get('/items', 'nginx-denied');
    expect(res.status).toBe(403);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('retry-after')).toBeNull();
    expect(await res.json()).toEqual({ error: 'Forbidden', reason: 'on the deny list' });
  });

  it('forwards an allowed request with the rate-limit headers', async () => {
    const res = await get('/items?x=1', 'nginx-allow');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, region: 'behind-nginx', path: '/items', method: 'GET' });
    expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
    expect(res.headers.get('x-ratelimit-remaining')).toBe('999');
    expect(Number(res.headers.get('x-ratelimit-reset'))).toBeGreaterThanOrEqual(0);
    expect(res.headers.get('ratelimit-policy')).toBe('"per-key";q=1000;w=86400');
    expect(res.headers.get('ratelimit')).toMatch(/^"per-key";r=999;t=\d+$/);
    expect(res.headers.get('retry-after')).toBeNull();
    // A POST with a body: the subrequest goes out as a body-less GET (proxy_method), the upstream gets the POST.
    const post = await fetch(`${nginx.url}/orders`, {
      method: 'POST',
      headers: { 'X-API-Key': 'nginx-allow', 'Content-Type': 'application/json' },
      body: '{"n":1}',
    });
    expect(post.status).toBe(200);
    expect(await post.json()).toMatchObject({ path: '/orders', method: 'POST' });
    expect(post.headers.get('x-ratelimit-remaining')).toBe('998');
  });

  it('admits 1,000 requests per API key; the 1,001st gets 429 with the exact body and headers', async () => {
    const key = 'nginx-thousand';
    const statuses: number[] = [];
    let next = 0;
    const worker = async () => {
      while (next < 1_000) {
        next++;
        const res = await get(`/items/${next}`, key);
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    expect(statuses.length).toBe(1_000);
    expect(statuses.filter((s) => s === 200).length).toBe(1_000);

    const denied = await get('/items/1001', key);
    expect(denied.status).toBe(429);
    expect(await denied.text()).toBe(BODY);
    expect(denied.headers.get('content-type')).toBe('application/json');
    expect(denied.headers.get('x-ratelimit-limit')).toBe('1000');
    expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(Number(denied.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0);
    expect(Number(denied.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(denied.headers.get('ratelimit-policy')).toBe('"per-key";q=1000;w=86400');
    expect(denied.headers.get('ratelimit')).toMatch(/^"per-key";r=0;t=\d+$/);
    // Another key is untouched.
    expect((await get('/items', 'nginx-other')).status).toBe(200);
  });

  it('limits /checkout to 10 per minute per key', async () => {
    await awayFromWindowEdge(60_000, 5_000);
    const key = 'nginx-checkout';
    for (let i = 1; i <= 10; i++) {
      const res = await get('/checkout', key);
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBe('10');
      expect(res.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
    }
    const denied = await get('/checkout', key);
    expect(denied.status).toBe(429);
    expect(await denied.text()).toBe(BODY);
    expect(denied.headers.get('x-ratelimit-limit')).toBe('10');
    expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(denied.headers.get('ratelimit-policy')).toBe('"checkout";q=10;w=60, "per-key";q=1000;w=86400');
    const retry = Number(denied.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    // The key's other paths still pass (only the /checkout budget is spent).
    expect((await get('/search', key)).status).toBe(200);
  });

  it('limits callers without a key per client address (X-Real-IP from nginx)', async () => {
    const res = await get('/anon');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBe('60');
  });

  it('answers a request that is not an auth_request subrequest 400 with a reason', async () => {
    const res = await fetch(`${service.url}/v1/auth`);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatch(/X-Original-URI/);
    expect(nginx.stderr()).not.toMatch(/\[(emerg|alert|crit)\]/);
  });
});

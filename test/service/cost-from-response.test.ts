// rules[].costFromResponse with a real redis-server and a real upstream: the gateway reserves the rule's reserve at
// admission and, once the upstream answered, keeps the cost its x-tokens-used header reports (a missing or garbled
// header keeps the whole reserve, an overrun is charged the reserve and counted); the window never admits more
// than its limit. The Hono middleware does the same with a handler's header, and the decision API through the
// settle token of /v1/check and POST /v1/release.
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { quotafed } from '../../src/http/middleware.ts';
import type { QuotafedEnv } from '../../src/http/env.ts';
import { createRegionEngine, startRegionService, type RegionEngine, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, eventually, metricValue, startUpstream, type Upstream } from './fixtures.ts';

const TOKENS_RULE = {
  name: 'tokens',
  match: { identity: 'apiKey', endpoints: ['/llm/*'] },
  by: ['apiKey'],
  algorithm: 'fixedWindow',
  limit: 1000,
  period: '1m',
  costFromResponse: { header: 'X-Tokens-Used', reserve: 100 },
};

describe('costFromResponse', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let service: RegionService;
  let config: Config;

  beforeAll(async () => {
    // /llm/<anything>?tokens=<value>: the answer's x-tokens-used is <value>; "none" sends no header.
    upstream = await startUpstream((req): Record<string, string> => {
      const tokens = new URL(req.url ?? '/', 'http://upstream').searchParams.get('tokens');
      return tokens === null || tokens === 'none' ? {} : { 'x-tokens-used': tokens };
    });
    config = parseConfig({
      region: 'solo',
      port: 0,
      logLevel: 'silent',
      redis: { url: redis.url },
      upstream: { url: upstream.url },
      rules: [TOKENS_RULE, { ...TOKENS_RULE, name: 'small', match: { identity: 'apiKey', endpoints: ['/small/*'] }, limit: 300 }],
    });
    service = await startRegionService(config, { dashboard: false, federation: false });
  });
  afterAll(async () => {
    await service?.close();
    await upstream?.close();
  });

  const get = (path: string, apiKey: string) => fetch(`${service.url}${path}`, { headers: { 'X-API-Key': apiKey } });
  const metrics = async () => (await fetch(`${service.url}/metrics`)).text();
  const costs = async (rule: string, outcome: string) => metricValue(await metrics(), 'quotafed_response_costs_total', { rule, outcome });
  const settled = async (rule: string) => (await costs(rule, 'reported')) + (await costs(rule, 'missing')) + (await costs(rule, 'overrun'));
  // What the window has left for this key, read without spending (consume: false): a peek that would be admitted
  // answers what would be left after this request's reserve (100 for both rules), so the reserve is added back.
  const remaining = async (apiKey: string, path = '/llm/x') => {
    const response = await fetch(`${service.url}/v1/check`, {
      method: 'POST',
      body: JSON.stringify({ apiKey, method: 'GET', path, consume: false }),
    });
    const outcome = ((await response.json()) as { outcomes: { allowed: boolean; remaining: number }[] }).outcomes[0]!;
    return outcome.remaining + (outcome.allowed ? 100 : 0);
  };
  // The key's window comes to have `left` (a settlement's refund lands just after its answer).
  const leaves = (apiKey: string, left: number) => eventually(async () => expect(await remaining(apiKey)).toBe(left));
  const refunds = async (rule: string) => metricValue(await metrics(), 'quotafed_response_refunds_total', { rule });
  // One request through the gateway, then wait for its settlement to be counted.
  const spend = async (path: string, apiKey: string, rule = 'tokens') => {
    const before = await settled(rule);
    const response = await get(path, apiKey);
    await response.arrayBuffer();
    await eventually(async () => expect(await settled(rule)).toBe(before + 1));
    return response;
  };

  it('charges what the header reports; a missing or garbled header charges the reserve; an overrun the reserve', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    await leaves('key-a', 1000);
    expect((await spend('/llm/chat?tokens=30', 'key-a')).status).toBe(200);
    await leaves('key-a', 970);
    await spend('/llm/chat?tokens=50', 'key-a');
    await spend('/llm/chat?tokens=0', 'key-a');
    await leaves('key-a', 920);
    expect(await costs('tokens', 'reported')).toBe(3);

    await spend('/llm/chat?tokens=none', 'key-a');
    await leaves('key-a', 820);
    await spend('/llm/chat?tokens=12abc', 'key-a');
    await leaves('key-a', 720);
    expect(await costs('tokens', 'missing')).toBe(2);

    await spend('/llm/chat?tokens=500', 'key-a');
    await leaves('key-a', 620);
    expect(await costs('tokens', 'overrun')).toBe(1);
    expect(await metricValue(await metrics(), 'quotafed_response_cost_overrun_total', { rule: 'tokens' })).toBe(400);
  });

  it('never admits more than the limit: admission reserves, so concurrent requests are refused before their answers', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    // limit 300, reserve 100: three at once are admitted, the fourth is refused although each will cost 10.
    const answers = await Promise.all([0, 1, 2, 3].map(() => get('/small/x?tokens=10', 'key-b')));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 429]);
    await eventually(async () => expect(await remaining('key-b', '/small/x')).toBe(270));
    // One at a time, each costing 10: admitted while 100 are left, then refused. What the window counted never
    // exceeds the limit, and it is exactly what the answers reported.
    let admitted = 3;
    for (let i = 0; i < 40; i++) {
      const before = await refunds('small');
      const response = await get('/small/x?tokens=10', 'key-b');
      await response.arrayBuffer();
      if (response.status === 429) break;
      admitted++;
      await eventually(async () => expect(await refunds('small')).toBe(before + 1));
    }
    const left = await remaining('key-b', '/small/x');
    expect(left).toBeLessThan(100);
    expect(admitted * 10).toBeLessThanOrEqual(300);
    // 10 · (n - 1) + 100 <= 300: the 21st is the last one a reserve of 100 fits.
    expect(admitted).toBe(21);
    expect(left).toBe(300 - admitted * 10);
    expect((await get('/small/x?tokens=10', 'key-b')).status).toBe(429);
  });

  it('settles a /v1/check admission with the cost the caller reports to /v1/release, once', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    const check = await fetch(`${service.url}/v1/check`, {
      method: 'POST',
      body: JSON.stringify({ apiKey: 'key-c', method: 'GET', path: '/llm/x' }),
    });
    const body = (await check.json()) as { allowed: boolean; remaining: number; settle?: string };
    expect(body.allowed).toBe(true);
    expect(body.remaining).toBe(900);
    expect(typeof body.settle).toBe('string');
    const release = (settle: unknown) => fetch(`${service.url}/v1/release`, { method: 'POST', body: JSON.stringify({ settle }) });
    const first = await release({ token: body.settle, cost: 25 });
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ released: 0, refunded: 1 });
    await leaves('key-c', 975);
    // The same token again (another amount): nothing more is refunded.
    expect(await (await release({ token: body.settle, cost: 0 })).json()).toEqual({ released: 0, refunded: 0 });
    await leaves('key-c', 975);
    // A token this region did not sign is refused.
    const forged = `${body.settle!.split('.')[0]}.${Buffer.from('x'.repeat(32)).toString('base64url')}`;
    const refused = await release({ token: forged, cost: 0 });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toContain('settle.token');
  });

  it('in the Hono middleware: a handler answer header settles the admission', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    const region: RegionEngine = await createRegionEngine(config);
    try {
      const app = new Hono<QuotafedEnv>();
      app.use('/llm/*', quotafed({ engine: region.engine }));
      app.get('/llm/chat', (c) => c.text('ok', 200, { 'X-Tokens-Used': c.req.query('tokens') ?? '' }));
      const before = await settled('tokens');
      expect((await app.request('/llm/chat?tokens=7', { headers: { 'X-API-Key': 'key-d' } })).status).toBe(200);
      await eventually(async () => expect(await settled('tokens')).toBe(before + 1));
      await leaves('key-d', 993);
    } finally {
      await region.close();
    }
  });
});

// No path spelling skips an endpoint rule: /checkout is limited (10 per minute, failMode closed), and every
// other spelling of it either counts against the same rule and reaches the upstream as /checkout, or is refused
// with 400 and never forwarded. The same function decides for the gateway, /v1/check and the Hono middleware.
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRegionEngine } from '../../src/service.ts';
import { canonicalPath, pathBytes } from '../../src/http/path.ts';
import { quotafed } from '../../src/http/middleware.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { send } from '../hardening/raw-http.ts';
import { awayFromWindowEdge, startUpstream, type Upstream } from '../service/fixtures.ts';
import { silentLogger } from '../../src/log.ts';

const LIMIT = 10;
const rules = [
  {
    name: 'checkout',
    match: { endpoints: ['/checkout'] },
    by: ['apiKey'],
    algorithm: 'fixedWindow',
    limit: LIMIT,
    period: '1m',
    failMode: 'closed',
  },
];

describe('canonicalPath', () => {
  it('gives one form per resource and refuses what has none', () => {
    const ok = (raw: string) => canonicalPath(raw);
    expect(ok('/checkout/')).toEqual({ ok: true, path: '/checkout' });
    expect(ok('/CHECKOUT')).toEqual({ ok: true, path: '/checkout' });
    expect(ok('/checkout;x')).toEqual({ ok: true, path: '/checkout' });
    expect(ok('/%63heckout')).toEqual({ ok: true, path: '/checkout' });
    expect(ok('//x/checkout')).toEqual({ ok: true, path: '/x/checkout' });
    expect(ok('/a/..;/checkout')).toEqual({ ok: true, path: '/checkout' });
    expect(ok('/a/%2e%2e/checkout?x=1')).toEqual({ ok: true, path: '/checkout' });
    expect(ok('/files/my%20doc%3b')).toEqual({ ok: true, path: '/files/my%20doc%3B' });
    // Bytes outside pchar travel percent-encoded: a raw UTF-8 é (as Node hands it over) and an encoded one agree.
    expect(ok('/caf\u00c3\u00a9')).toEqual({ ok: true, path: '/caf%C3%A9' });
    expect(ok('/caf%c3%a9')).toEqual({ ok: true, path: '/caf%C3%A9' });
    expect(ok(pathBytes('/café'))).toEqual({ ok: true, path: '/caf%C3%A9' });
    expect(ok('/a"b{c}')).toEqual({ ok: true, path: '/a%22b%7Bc%7D' });
    expect(canonicalPath('/Checkout/', { caseSensitive: true, trailingSlash: 'strict' })).toEqual({ ok: true, path: '/Checkout/' });
    for (const bad of [
      '/checkout%2f',
      '/checkout%2F',
      '/checkout%5c',
      '/checkout%20',
      '/%20checkout',
      '/checkout%00',
      '/checkout%zz',
      '/checkout%4',
      '/..',
      '/a/../../checkout',
      'checkout',
    ]) {
      expect(canonicalPath(bad).ok, bad).toBe(false);
    }
  });

  it('refuses rule patterns that could never match a canonical path (config error naming the field)', () => {
    expect(() => parseConfig({ region: 'r', rules: [{ ...rules[0], match: { endpoints: ['/Checkout'] } }] })).toThrow(
      /rules\[0\]\.match\.endpoints\[0\]/,
    );
    expect(() => parseConfig({ region: 'r', rules: [{ ...rules[0], match: { endpoints: ['/checkout/'] } }] })).toThrow(
      /rules\[0\]\.match\.endpoints\[0\]/,
    );
    expect(() =>
      parseConfig({ region: 'r', paths: { caseSensitive: true }, rules: [{ ...rules[0], match: { endpoints: ['/Checkout/:itemId'] } }] }),
    ).not.toThrow();
  });
});

describe('path spellings against a real gateway', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let service: RegionService;

  beforeAll(async () => {
    upstream = await startUpstream();
    service = await startRegionService(
      parseConfig({
        region: 'paths',
        port: 0,
        logLevel: 'silent',
        redis: { url: redis.url, commandTimeoutMs: 2_000 },
        upstream: { url: upstream.url },
        rules,
      }),
      { logger: silentLogger(), federation: false },
    );
  });
  afterAll(async () => {
    await service?.close();
    await upstream?.close();
  });

  it('counts every spelling of /checkout against the rule and forwards /checkout', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    for (const [i, spelling] of ['/checkout/', '/CHECKOUT', '/checkout;x', '/%63heckout', '/a/..;/checkout'].entries()) {
      const before = upstream.seen.length;
      const statuses: number[] = [];
      for (let n = 0; n < 12; n++)
        statuses.push((await send(service.url, { path: spelling, headers: { authorization: `Bearer spelling-${i}` } })).status);
      expect(
        statuses.filter((s) => s === 200),
        spelling,
      ).toHaveLength(LIMIT);
      expect(
        statuses.filter((s) => s === 429),
        spelling,
      ).toHaveLength(2);
      expect(new Set(upstream.seen.slice(before).map((r) => r.path)), spelling).toEqual(new Set(['/checkout']));
    }
  });

  it('shares one budget across spellings', async () => {
    const statuses: number[] = [];
    for (const spelling of ['/checkout', '/checkout/', '/CHECKOUT', '/checkout;x']) {
      for (let n = 0; n < 3; n++)
        statuses.push((await send(service.url, { path: spelling, headers: { authorization: 'Bearer one-budget' } })).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(LIMIT);
  });

  it('refuses spellings without a canonical form with 400 and a reason, forwarding nothing', async () => {
    const before = upstream.seen.length;
    for (const spelling of ['/checkout%2f', '/checkout%20', '/checkout%00', '/checkout%zz', '/a/../../checkout']) {
      const res = await send(service.url, { path: spelling, headers: { authorization: 'Bearer refused' } });
      expect(res.status, spelling).toBe(400);
      expect((JSON.parse(res.body) as { reasons: string[] }).reasons.length, spelling).toBe(1);
    }
    expect(upstream.seen.length).toBe(before);
  });

  it('forwards //x/checkout as /x/checkout (another resource, not limited by /checkout) and never forwards owned paths', async () => {
    const before = upstream.seen.length;
    expect((await send(service.url, { path: '//x/checkout', headers: { authorization: 'Bearer slashes' } })).status).toBe(200);
    expect(upstream.seen.slice(before).map((r) => r.path)).toEqual(['/x/checkout']);
    expect((await send(service.url, { path: '/HEALTHZ' })).status).toBe(404);
    expect((await send(service.url, { path: '//v1//check' })).status).toBe(404);
    expect(upstream.seen.length).toBe(before + 1);
  });

  it('/v1/check matches the canonical path and refuses the others with 400', async () => {
    const check = (path: string) =>
      send(service.url, { method: 'POST', path: '/v1/check', body: JSON.stringify({ apiKey: 'check-key', method: 'GET', path }) });
    const allowed: boolean[] = [];
    for (const spelling of ['/checkout/', '/CHECKOUT', '/checkout;x', '/checkout', '/%63heckout', '//checkout']) {
      for (let n = 0; n < 2; n++) {
        const res = await check(spelling);
        expect(res.status).toBe(200);
        const body = JSON.parse(res.body) as { allowed: boolean; rule: string };
        expect(body.rule, spelling).toBe('checkout');
        allowed.push(body.allowed);
      }
    }
    expect(allowed.filter(Boolean)).toHaveLength(LIMIT);
    for (const spelling of ['/checkout%2f', '/checkout%20', '/checkout%00']) {
      const res = await check(spelling);
      expect(res.status, spelling).toBe(400);
      expect(res.body).toMatch(/path/);
    }
  });
});

describe('path spellings through the Hono middleware', async () => {
  const redis = await useRedis();
  const config = parseConfig({ region: 'mw', port: 0, logLevel: 'silent', redis: { url: redis.url, commandTimeoutMs: 2_000 }, rules });
  const region = await createRegionEngine(config, { logger: silentLogger() });
  afterAll(async () => {
    await region.engine.close();
    region.redis.disconnect();
  });
  const app = new Hono();
  app.use('*', quotafed({ engine: region.engine }));
  app.all('*', (c) => c.text('ok'));

  it('limits every spelling on one budget and refuses the uncanonical ones', async () => {
    const statuses: number[] = [];
    for (const spelling of ['/checkout/', '/CHECKOUT', '/checkout;x', '/%63heckout']) {
      for (let n = 0; n < 3; n++) statuses.push((await app.request(spelling, { headers: { authorization: 'Bearer mw' } })).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(LIMIT);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    const refused = await app.request('/checkout%2f', { headers: { authorization: 'Bearer mw' } });
    expect(refused.status).toBe(400);
  });
});

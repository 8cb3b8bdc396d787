// The admin surface, verified from outside: the admin token guards admin routes, chaos annotations and (with
// protectCheck) the decision endpoints; the comparison never throws on unequal lengths and accepts only the exact
// token; with admin.port the public listener has no admin routes, and no spelling of an admin path ever reaches
// the gateway's upstream (which would also hand it the operator's token).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyEnvOverrides } from '../../src/config/load.ts';
import { parseConfig } from '../../src/config/load.ts';
import { tokenMatches, type AdminRoutes } from '../../src/http/admin.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';
import { closeAgent, rawRequest, send } from './raw-http.ts';

const TOKEN = 'hardening-admin-token-0123456789';
const status: AdminRoutes = (admin) => admin.get('/status', (c) => c.json({ ok: true }));
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

describe('tokenMatches (constant-time comparison)', () => {
  it('is exactly string equality and never throws, whatever the lengths', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 300 }),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 300 }),
        (presented, expected) => {
          expect(tokenMatches(presented, expected)).toBe(presented === expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('rejects every prefix, extension and one-character change of the token', () => {
    for (let i = 0; i <= TOKEN.length + 64; i++) {
      const attempt = i <= TOKEN.length ? TOKEN.slice(0, i) : TOKEN + 'x'.repeat(i - TOKEN.length);
      expect(tokenMatches(attempt, TOKEN)).toBe(i === TOKEN.length);
    }
    for (let i = 0; i < TOKEN.length; i++) {
      const flipped = TOKEN.slice(0, i) + String.fromCharCode(TOKEN.charCodeAt(i) ^ 1) + TOKEN.slice(i + 1);
      expect(tokenMatches(flipped, TOKEN)).toBe(false);
    }
  });

  it('takes the token from QUOTAFED_ADMIN_TOKEN', () => {
    const raw = { region: 'env-token', rules: [{ name: 'r', limit: 1 }] };
    expect(parseConfig(applyEnvOverrides(raw, { QUOTAFED_ADMIN_TOKEN: TOKEN }), 'env').admin.token).toBe(TOKEN);
  });
});

describe('admin surface of a running gateway', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  /** Admin on the public port, token set, /v1/check protected. */
  let shared: RegionService;
  /** Admin on its own listener. */
  let separate: RegionService;
  /** No token configured. */
  let tokenless: RegionService;

  beforeAll(async () => {
    upstream = await startUpstream();
    const gateway = (admin: Record<string, unknown> | undefined) => (raw: Record<string, unknown>) => {
      raw.upstream = { url: upstream.url };
      if (admin) raw.admin = admin;
    };
    [shared, separate, tokenless] = await Promise.all([
      startRegionService(seedConfig(redis.url, gateway({ token: TOKEN, protectCheck: true })), { adminRoutes: [status] }),
      startRegionService(seedConfig(redis.url, gateway({ token: TOKEN, port: 0 })), { adminRoutes: [status] }),
      startRegionService(seedConfig(redis.url, gateway(undefined)), { adminRoutes: [status] }),
    ]);
  });
  afterAll(async () => {
    closeAgent();
    await Promise.all([shared?.close(), separate?.close(), tokenless?.close()]);
    await upstream?.close();
  });

  /** Requests the upstream saw whose path is one of ours under /admin. */
  const forwardedAdmin = () =>
    upstream.seen.filter((r) => /^\/admin(\/|\?|$)/.test(new URL(decodeURIComponentSafe(r.path), 'http://x').pathname));

  it('accepts only a well-formed bearer header carrying the exact token', async () => {
    const url = `${shared.url}/admin/status`;
    const refused: Array<Record<string, string>> = [
      {},
      { Authorization: 'Bearer' },
      { Authorization: 'Bearer ' },
      { Authorization: `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}` },
      { Authorization: `Bearer ${TOKEN} extra` },
      { Authorization: `Bearer ${TOKEN}x` },
      { Authorization: `Bearer ${TOKEN.slice(0, -1)}` },
      { Authorization: `Token ${TOKEN}` },
      { 'X-API-Key': TOKEN },
      { Cookie: `token=${TOKEN}` },
      { Authorization: `Bearer ${'a'.repeat(8_000)}` },
    ];
    for (const headers of refused) {
      const res = await send(url, { path: '/admin/status', headers });
      expect(res.status, JSON.stringify(headers).slice(0, 80)).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    }
    expect((await send(url, { path: `/admin/status?token=${TOKEN}` })).status).toBe(401);
    for (const header of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `Bearer\t${TOKEN}`, `BEARER ${TOKEN}  `]) {
      expect((await send(url, { path: '/admin/status', headers: { Authorization: header } })).status, header).toBe(200);
    }
  });

  it('keeps /v1/check and /v1/release behind the token when protectCheck is set', async () => {
    const check = JSON.stringify({ apiKey: 'k', method: 'GET', path: '/search' });
    const release = JSON.stringify({ leases: [] });
    for (const [path, body] of [
      ['/v1/check', check],
      ['/v1/release', release],
    ] as const) {
      expect((await fetch(`${shared.url}${path}`, { method: 'POST', body })).status).toBe(401);
      expect((await fetch(`${shared.url}${path}`, { method: 'POST', body, headers: bearer('not-the-token-0123456789') })).status).toBe(401);
      expect((await fetch(`${shared.url}${path}`, { method: 'POST', body, headers: bearer(TOKEN) })).status).toBe(200);
    }
  });

  it('puts /dashboard/annotations behind the token on the public port (and closes it without one)', async () => {
    const body = JSON.stringify({ scenario: 'hardening' });
    const before = upstream.seen.length;
    // With a separate admin listener the dashboard lives there, like /metrics; the public port refuses it.
    expect((await fetch(`${separate.url}/dashboard`)).status).toBe(405);
    expect((await fetch(`${separate.url}/dashboard/annotations`, { method: 'POST', body, headers: bearer(TOKEN) })).status).toBe(405);
    for (const base of [shared.url, separate.adminUrl!]) {
      const url = `${base}/dashboard/annotations`;
      for (const method of ['GET', 'POST', 'DELETE']) {
        const init = { method, ...(method === 'POST' ? { body } : {}) };
        expect((await fetch(url, init)).status, `${method} without token`).toBe(401);
        expect((await fetch(url, { ...init, headers: bearer('wrong-token-0123456789abc') })).status).toBe(401);
      }
      const posted = await fetch(url, { method: 'POST', body, headers: bearer(TOKEN) });
      expect(posted.status).toBe(200);
      expect(((await posted.json()) as { scenario: string }).scenario).toBe('hardening');
      expect((await fetch(url, { method: 'DELETE', headers: bearer(TOKEN) })).status).toBe(204);
    }
    for (const method of ['GET', 'POST', 'DELETE']) {
      expect((await fetch(`${tokenless.url}/dashboard/annotations`, { method, ...(method === 'POST' ? { body } : {}) })).status).toBe(403);
    }
    // The read-only page stays public; nothing here went to the upstream.
    expect((await fetch(`${shared.url}/dashboard`)).status).toBe(200);
    expect(upstream.seen.length).toBe(before);
  });

  // Spellings that Hono's router decodes or URL parsing normalises to /admin/…
  const adminSpellings = [
    '/admin',
    '/admin/',
    '/admin/status',
    '/admin/status/',
    '/admin/status?x=1',
    '/admin/unknown/deeper',
    '/%61dmin/status',
    '/admin/%73tatus',
    '/%61%64%6d%69%6e/status',
    '/x/../admin/status',
    '/x/%2e%2e/admin/status',
    '/./admin/status',
    '/admin/status#frag',
  ];

  it('never serves admin routes on the public port when admin.port is set, in any spelling or method', async () => {
    const before = upstream.seen.length;
    for (const path of adminSpellings) {
      for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
        const res = await send(separate.url, { method, path, headers: bearer(TOKEN) });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body).not.toContain('"ok":true');
      }
    }
    // The same paths with raw request lines (no client-side normalisation).
    for (const path of adminSpellings) {
      const res = await rawRequest(
        Number(new URL(separate.url).port),
        `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`,
      );
      expect(res.status, path).toBe(404);
      expect(res.text, path).not.toContain('"ok":true');
    }
    expect(forwardedAdmin()).toEqual([]);
    expect(upstream.seen.length).toBe(before);
    // …while the admin listener serves them, and forwards nothing.
    expect((await fetch(`${separate.adminUrl}/admin/status`, { headers: bearer(TOKEN) })).status).toBe(200);
    const seen = upstream.seen.length;
    expect((await fetch(`${separate.adminUrl}/search`, { headers: { 'X-API-Key': 'k' } })).status).toBe(404);
    expect(upstream.seen.length).toBe(seen);
  });

  it('answers admin paths on the shared public port itself (401 without the token), never through the upstream', async () => {
    for (const service of [shared, tokenless]) {
      for (const path of adminSpellings) {
        for (const method of ['GET', 'POST', 'PUT', 'DELETE']) {
          const res = await send(service.url, { method, path, headers: { 'X-API-Key': 'some-client' } });
          expect([401, 403, 404, 405], `${method} ${path}`).toContain(res.status);
          expect(res.headers['x-upstream']).toBeUndefined();
        }
      }
    }
    expect(forwardedAdmin()).toEqual([]);
  });
});

function decodeURIComponentSafe(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

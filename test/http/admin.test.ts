// Admin routes: bearer token compared in constant time, a separate listener that takes them off the public
// port, and the optional token on /v1/check.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import { tokenMatches, type AdminRoutes } from '../../src/http/admin.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { seedConfig } from '../service/fixtures.ts';

const TOKEN = 'admin-token-0123456789';
const status: AdminRoutes = (admin) => admin.get('/status', (c) => c.json({ ok: true }));
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

describe('tokenMatches', () => {
  it('accepts only the exact token, whatever the length of the attempt', () => {
    expect(tokenMatches(TOKEN, TOKEN)).toBe(true);
    expect(tokenMatches(`${TOKEN}x`, TOKEN)).toBe(false);
    expect(tokenMatches(TOKEN.slice(0, -1), TOKEN)).toBe(false);
    expect(tokenMatches('', TOKEN)).toBe(false);
    expect(tokenMatches(undefined, TOKEN)).toBe(false);
  });
});

describe('admin routes', async () => {
  const redis = await useRedis();
  let shared: RegionService;
  let separate: RegionService;
  let tokenless: RegionService;

  beforeAll(async () => {
    shared = await startRegionService(
      seedConfig(redis.url, (raw) => void (raw.admin = { token: TOKEN, protectCheck: true })),
      { adminRoutes: [status] },
    );
    separate = await startRegionService(
      seedConfig(redis.url, (raw) => void (raw.admin = { token: TOKEN, port: 0 })),
      { adminRoutes: [status] },
    );
    tokenless = await startRegionService(seedConfig(redis.url), { adminRoutes: [status] });
  });
  afterAll(async () => {
    await Promise.all([shared?.close(), separate?.close(), tokenless?.close()]);
  });

  it('serves admin routes on the public port only with the right token', async () => {
    expect((await fetch(`${shared.url}/admin/status`)).status).toBe(401);
    expect((await fetch(`${shared.url}/admin/status`, { headers: bearer('wrong-token-0123456789') })).status).toBe(401);
    expect((await fetch(`${shared.url}/admin/status`, { headers: { 'X-API-Key': TOKEN } })).status).toBe(401);
    const ok = await fetch(`${shared.url}/admin/status`, { headers: bearer(TOKEN) });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true });
    expect((await fetch(`${shared.url}/admin/unknown`, { headers: bearer(TOKEN) })).status).toBe(404);
  });

  it('keeps admin routes closed on the public port when no token is configured', async () => {
    expect((await fetch(`${tokenless.url}/admin/status`)).status).toBe(403);
  });

  it('moves admin routes and metrics to admin.port', async () => {
    expect(separate.adminUrl).toBeDefined();
    expect(separate.adminUrl).not.toBe(separate.url);
    expect((await fetch(`${separate.url}/admin/status`, { headers: bearer(TOKEN) })).status).toBe(404);
    expect((await fetch(`${separate.url}/metrics`)).status).toBe(405);
    expect((await fetch(`${separate.adminUrl}/admin/status`)).status).toBe(401);
    expect((await fetch(`${separate.adminUrl}/admin/status`, { headers: bearer(TOKEN) })).status).toBe(200);
    const metrics = await fetch(`${separate.adminUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('quotafed_decisions_total');
    // The admin listener decides nothing.
    expect((await fetch(`${separate.adminUrl}/v1/check`, { method: 'POST', body: '{}' })).status).toBe(404);
  });

  it('requires the token on /v1/check when admin.protectCheck is set', async () => {
    const body = JSON.stringify({ apiKey: 'k', method: 'GET', path: '/search' });
    expect((await fetch(`${shared.url}/v1/check`, { method: 'POST', body })).status).toBe(401);
    expect((await fetch(`${shared.url}/v1/check`, { method: 'POST', body, headers: bearer(TOKEN) })).status).toBe(200);
    expect((await fetch(`${tokenless.url}/v1/check`, { method: 'POST', body })).status).toBe(200);
  });
});

// Plans per API key end to end (docs/plans.md), on real redis-servers with real services: a single region (the
// limits of free, pro and unlimited through the gateway, the admin API and its 400s, a policy reload), and the
// shipped three-region federation, where PUT /admin/plans/<apiKey> in one region reaches the others and the window
// of the change never admits more than max(old, new) + B across the regions.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { SHIPPED_REGIONS, startShippedRegions, type RawConfig, type ShippedRegions } from '../support/shipped-regions.ts';
import { eventually, metricValue, sleep, startUpstream, type Upstream } from './fixtures.ts';

const TOKEN = 'plans-test-admin-token-0123456789';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

const put = (url: string, apiKey: string, body: unknown) =>
  fetch(`${url}/admin/plans/${encodeURIComponent(apiKey)}`, { method: 'PUT', headers: admin, body: JSON.stringify(body) });
const planOf = async (url: string, apiKey: string) =>
  (await (await fetch(`${url}/admin/plans/${encodeURIComponent(apiKey)}`, { headers: admin })).json()) as {
    plan: string | null;
    source: string;
    transition?: { from: string | null; until: number };
  };

describe('plans in one region', async () => {
  const redis = await useRedis();
  const dir = mkdtempSync(join(tmpdir(), 'quotafed-plans-'));
  const path = join(dir, 'region.yaml');
  let upstream: Upstream;
  let service: RegionService;

  const writeConfig = (freeLimit: number) =>
    writeFileSync(
      path,
      stringify({
        region: 'us-east',
        port: 0,
        redis: { url: redis.url, commandTimeoutMs: 2000 },
        upstream: { url: upstream.url },
        admin: { token: TOKEN },
        logLevel: 'silent',
        lists: { refreshMs: 200 },
        plans: {
          default: 'free',
          tiers: { free: { fw: { limit: freeLimit } }, pro: { fw: { limit: 12 } }, unlimited: 'unlimited' },
          keys: { 'config-pro': 'pro', 'config-unlimited': 'unlimited' },
        },
        rules: [{ name: 'fw', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1h' }],
      }),
    );
  /** Statuses of `n` gateway requests of this key. */
  const statuses = async (apiKey: string, n: number) => {
    const seen: number[] = [];
    for (let i = 0; i < n; i++) seen.push((await fetch(`${service.url}/items`, { headers: { 'x-api-key': apiKey } })).status);
    return seen;
  };
  const admitted = (seen: number[]) => seen.filter((status) => status === 200).length;

  beforeAll(async () => {
    upstream = await startUpstream();
    writeConfig(4);
    service = await startRegionService(loadConfigFile(path, {}), { configPath: path, dashboard: false, federation: false });
  });
  afterAll(async () => {
    await service?.close();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a key on free gets 429 after free’s limit, on pro after pro’s, on unlimited never (and counted)', async () => {
    const free = await statuses('some-key', 6);
    expect(free).toEqual([200, 200, 200, 200, 429, 429]);
    const pro = await statuses('config-pro', 14);
    expect(admitted(pro)).toBe(12);
    expect(pro.slice(12)).toEqual([429, 429]);
    const before = await metricValue(await (await fetch(`${service.url}/metrics`)).text(), 'quotafed_unlimited_decisions_total', {
      rule: 'fw',
    });
    expect(await statuses('config-unlimited', 30)).toEqual(Array(30).fill(200));
    const after = await metricValue(await (await fetch(`${service.url}/metrics`)).text(), 'quotafed_unlimited_decisions_total', {
      rule: 'fw',
    });
    expect(after - before).toBe(30);
  });

  it('PUT, GET and DELETE /admin/plans/<apiKey>; a bad plan is a 400 with the reason', async () => {
    const bogus = await put(service.url, 'admin-key', { plan: 'gold' });
    expect(bogus.status).toBe(400);
    expect(await bogus.json()).toMatchObject({
      error: 'no plan "gold" in plans.tiers',
      reasons: ['plan: known plans are free, pro, unlimited'],
    });
    expect((await put(service.url, 'admin-key', { plan: 5 })).status).toBe(400);
    expect((await put(service.url, 'admin-key', { plan: 'pro', extra: 1 })).status).toBe(400);
    const unauthenticated = await fetch(`${service.url}/admin/plans/admin-key`, { method: 'PUT', body: '{"plan":"pro"}' });
    expect(unauthenticated.status).toBe(401);

    expect(await planOf(service.url, 'admin-key')).toMatchObject({ plan: 'free', source: 'default' });
    const created = await put(service.url, 'admin-key', { plan: 'unlimited' });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ plan: 'unlimited', previous: 'free', created: true, complete: true });
    expect(await planOf(service.url, 'admin-key')).toMatchObject({ plan: 'unlimited', source: 'admin', transition: { from: 'free' } });
    // In the transition the old plan still decides: free's 4, then 429.
    expect(admitted(await statuses('admin-key', 6))).toBe(4);
    const again = await put(service.url, 'admin-key', { plan: 'pro' });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ plan: 'pro', previous: 'unlimited', created: false });

    const removed = await fetch(`${service.url}/admin/plans/admin-key`, { method: 'DELETE', headers: admin });
    expect(removed.status).toBe(200);
    expect(await removed.json()).toMatchObject({ deleted: true, plan: 'free', previous: 'pro' });
    expect(await planOf(service.url, 'admin-key')).toMatchObject({ plan: 'free', source: 'default' });
    const missing = await fetch(`${service.url}/admin/plans/admin-key`, { method: 'DELETE', headers: admin });
    expect(missing.status).toBe(404);
  });

  it('a policy reload picks up the plans of the config', async () => {
    writeConfig(2);
    const result = await service.reloadPolicy();
    expect(result).toMatchObject({ ok: true, changed: true });
    expect(await statuses('fresh-key', 3)).toEqual([200, 200, 429]);
  });
});

describe('plans in a three-region federation', async () => {
  const NAMES: string[] = [...SHIPPED_REGIONS];
  const servers = await Promise.all(NAMES.map(() => useRedis()));
  const PERIOD = 10_000;
  const SKEW = 1_000;
  const BUDGET = 2;
  let upstream: Upstream;
  let regions: ShippedRegions;
  const url = (region: string) => regions.services.get(region)!.url;

  beforeAll(async () => {
    upstream = await startUpstream();
    regions = await startShippedRegions({
      redisUrl: (region) => servers[NAMES.indexOf(region)]!.url,
      upstreamUrl: upstream.url,
      secret: 'plans-test-federation-secret-0123',
      edit: (raw: RawConfig) => {
        raw.admin = { token: TOKEN };
        raw.lists = { refreshMs: 200 };
        (raw.federation as RawConfig).maxClockSkewMs = SKEW;
        (raw.rules as RawConfig[]).unshift({
          name: 'fw',
          match: { identity: 'apiKey', endpoints: ['/fw'] },
          by: ['apiKey'],
          algorithm: 'fixedWindow',
          limit: 100,
          period: PERIOD,
          leakageBudget: BUDGET,
        });
        raw.plans = { default: 'free', tiers: { free: { fw: { limit: 5 } }, pro: { fw: { limit: 15 } } } };
      },
    });
  });
  afterAll(async () => {
    await regions?.close();
    await upstream?.close();
  });

  it('PUT in one region reaches the others; the window of the change admits at most max(old, new) + B', async () => {
    // Start just after a window edge, so the spending, the change and the hammering share one window.
    await sleep(PERIOD - (Date.now() % PERIOD) + 100);
    const byWindow = new Map<number, number>();
    let sent = 0;
    /** One request per region, round robin, away from window edges; counts admissions by window. */
    const hammer = async (until: number) => {
      while (Date.now() < until) {
        const offset = Date.now() % PERIOD;
        if (offset < 150 || offset > PERIOD - 150) {
          await sleep(160);
          continue;
        }
        const window = Math.floor(Date.now() / PERIOD);
        const region = NAMES[sent++ % NAMES.length]!;
        const res = await fetch(`${url(region)}/fw`, { headers: { 'x-api-key': 'moving-key' } });
        if (res.status === 200) byWindow.set(window, (byWindow.get(window) ?? 0) + 1);
        await sleep(15);
      }
    };
    const first = Math.floor(Date.now() / PERIOD);
    await hammer(Date.now() + 1_500);
    const spentOld = byWindow.get(first) ?? 0;
    expect(spentOld).toBeLessThanOrEqual(5 + BUDGET);

    const res = await put(url('us-east'), 'moving-key', { plan: 'pro' });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { at: number; transitionMs: number; complete: boolean; regions: { region: string }[] };
    expect(body.complete).toBe(true);
    expect(body.regions.map((region) => region.region).sort()).toEqual([...NAMES].sort());
    expect(body.transitionMs).toBe(PERIOD + SKEW);
    for (const region of NAMES) {
      await eventually(async () => (await planOf(url(region), 'moving-key')).plan === 'pro', 5_000, `${region} on pro`);
    }

    // Through the end of the transition, and then in a window of pro alone.
    const transitionEnd = body.at + body.transitionMs;
    await hammer(transitionEnd);
    const changeWindow = byWindow.get(first) ?? 0;
    // max(L_old, L_new) + B, and in fact min(L_old, spent_old + L_new) + B: free's window was spent already.
    expect(changeWindow).toBeLessThanOrEqual(15 + BUDGET);
    expect(changeWindow).toBeLessThanOrEqual(5 + BUDGET);
    for (const [window, count] of byWindow) expect(count, `window ${window}`).toBeLessThanOrEqual(15 + BUDGET);

    const after = Math.floor(transitionEnd / PERIOD) + 1;
    await sleep(after * PERIOD - Date.now() + 100);
    await hammer(Date.now() + 4_000);
    const proWindow = byWindow.get(after) ?? 0;
    expect(proWindow).toBeGreaterThan(5 + BUDGET);
    expect(proWindow).toBeLessThanOrEqual(15 + BUDGET);
  }, 60_000);

  it('a region whose Redis does not answer when the plan is written gets it once it answers again', async () => {
    const frozen = servers[NAMES.indexOf('ap-south')]!;
    process.kill(frozen.pid!, 'SIGSTOP');
    let body: { complete: boolean; regions: { region: string; stored: boolean }[] };
    try {
      const res = await put(url('us-east'), 'late-key', { plan: 'pro' });
      expect(res.status).toBe(201);
      body = (await res.json()) as typeof body;
    } finally {
      process.kill(frozen.pid!, 'SIGCONT');
    }
    // Said at once: not every region has it yet.
    expect(body.complete).toBe(false);
    expect(body.regions.find((region) => region.region === 'ap-south')?.stored).toBe(false);
    expect(body.regions.find((region) => region.region === 'eu-west')?.stored).toBe(true);
    // The outbox writes it there once that Redis answers (retried every max(1 s, 5 x lists.refreshMs)).
    await eventually(async () => (await planOf(url('ap-south'), 'late-key')).plan === 'pro', 15_000, 'ap-south on pro');
    // The admin key view matches the caller as a decision does: under the assigned plan's rule, not the config's.
    const view = (rule: string) =>
      fetch(`${url('us-east')}/admin/federation/keys?rule=${rule}&apiKey=late-key&endpoint=/fw`, { headers: admin });
    expect((await view('fw.plan-pro')).status).toBe(200);
  }, 60_000);
});

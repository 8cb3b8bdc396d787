// GET /admin/keys/top, the dashboard's table of the most limited keys and the top-N gauges, after real traffic
// through /v1/check on a region service with its own redis-server: what they list, what they refuse (4xx with a
// reason), and that the gauges keep at most metricsTopN series per rule however many keys are denied.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RegionService } from '../../src/service.ts';
import { startRegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { seedConfig } from '../service/fixtures.ts';
import { dashboardSnapshot } from '../support/dashboard.ts';

const TOKEN = 'admin-token-0123456789';
const auth = { Authorization: `Bearer ${TOKEN}` };

describe('top keys over HTTP', async () => {
  const redis = await useRedis();
  let service: RegionService;

  beforeAll(async () => {
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.admin = { token: TOKEN };
        raw.topKeys = { capacity: 64, metricsTopN: 3 };
        raw.rules = [
          { name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 2, period: '1h' },
          {
            name: 'checkout',
            match: { identity: 'apiKey', endpoints: ['/checkout'] },
            by: ['apiKey', 'endpoint'],
            algorithm: 'fixedWindow',
            limit: 1,
            period: '1h',
          },
        ];
      }),
      { federation: false },
    );
  });
  afterAll(() => service?.close());

  const check = (apiKey: string, path = '/items') =>
    fetch(`${service.url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey, method: 'GET', path }) }).then((r) => r.json());
  const top = (query: string) => fetch(`${service.url}/admin/keys/top?${query}`, { headers: auth });
  const burst = async (apiKey: string, requests: number, path?: string) => {
    for (let i = 0; i < requests; i++) await check(apiKey, path);
  };
  const topSeries = async (metric: string) =>
    (await (await fetch(`${service.url}/metrics`)).text()).split('\n').filter((line) => line.startsWith(`${metric}{`));

  it('lists the most denied and the most admitted keys of a rule, masked, as this process sees them', async () => {
    await burst('hot-customer-0001', 12);
    await burst('warm-customer-0002', 5);
    for (let i = 0; i < 40; i++) await check(`cold-customer-${i}`);
    await burst('buyer-customer-04', 3, '/checkout');

    const response = await top('rule=per-key&by=denials&n=5');
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).not.toContain('hot-customer-0001');
    const answer = JSON.parse(text);
    expect(answer).toMatchObject({ region: 'us-east', scope: 'process', instance: expect.stringMatching(/:\d+$/) });
    const [perKey] = answer.rules;
    expect(perKey).toMatchObject({ rule: 'per-key', by: 'denials', total: 13, capacity: 64, floor: 0 });
    expect(perKey.entries.map((e: { key: string; count: number; error: number }) => [e.key.slice(0, 6), e.count, e.error])).toEqual([
      ['hot-…#', 10, 0],
      ['warm…#', 3, 0],
    ]);
    expect(perKey.window.startMs).toBeLessThanOrEqual(answer.at);
    expect(perKey.window.endMs).toBeGreaterThan(answer.at);
    expect(perKey.window.periodMs).toBe(3_600_000);

    const consumption = (await (await top('rule=per-key&by=consumption&n=64')).json()).rules[0];
    // Two each for the hot and warm keys, one per cold key, and the buyer's first /checkout (checkout denied the rest).
    expect(consumption.total).toBe(2 + 2 + 40 + 1);
    expect(consumption.entries).toHaveLength(43);

    const all = (await (await top('by=denials')).json()).rules;
    expect(all.map((view: { rule: string }) => view.rule)).toEqual(['per-key', 'checkout']);
    expect(all[1].entries[0].key).toMatch(/^buye…#[\w-]{6} \/checkout$/);
    expect(all[1].entries[0].count).toBe(2);
  });

  it('answers a bad query with 400 or 404 and the reason', async () => {
    const bad = async (query: string, status: number, reason: RegExp) => {
      const response = await top(query);
      expect(response.status, query).toBe(status);
      expect((await response.json()).error).toMatch(reason);
    };
    await bad('by=bogus', 400, /by/);
    await bad('n=0', 400, /n/);
    await bad('n=ten', 400, /n/);
    await bad('n=65', 400, /topKeys\.capacity \(64\)/);
    await bad('window=tomorrow', 400, /window/);
    await bad('rule=nope', 404, /no rule "nope"/);
    await bad('extra=1', 400, /extra/);
    expect((await fetch(`${service.url}/admin/keys/top`)).status).toBe(401);
  });

  it('shows the most denied keys on the dashboard', async () => {
    const snapshot = await dashboardSnapshot(service.url);
    const hot = snapshot.topLimited.find((row) => row.rule === 'per-key' && row.key.startsWith('hot-'));
    expect(hot).toMatchObject({ denials: 10, error: 0 });
    expect(hot!.ruleDenials).toBeGreaterThanOrEqual(13);
    expect(snapshot.topLimited.filter((row) => row.rule === 'per-key').length).toBeLessThanOrEqual(5);
  });

  it('keeps at most metricsTopN series per rule, dropping keys that left the top', async () => {
    const before = await topSeries('quotafed_top_key_denials');
    expect(before.filter((line) => line.includes('rule="per-key"'))).toHaveLength(2);
    expect(before.some((line) => line.includes('key="hot-…#') && line.endsWith(' 10'))).toBe(true);
    // 150 keys denied once each, then three keys denied 20 times: they take the top three.
    for (let i = 0; i < 150; i++) await burst(`many-keys-${i}`, 3);
    for (const key of ['new-top-key-a', 'new-top-key-b', 'new-top-key-c']) await burst(key, 22);
    const after = await topSeries('quotafed_top_key_denials');
    const perKey = after.filter((line) => line.includes('rule="per-key"'));
    expect(perKey).toHaveLength(3);
    // Each entered the full sketch in place of a key counted at most the floor: upper bounds of 20 plus that error.
    expect(
      perKey.every((line) => line.includes('key="new-') && Number(line.split(' ').at(-1)) >= 20),
      perKey.join('\n'),
    ).toBe(true);
    expect(after.some((line) => line.includes('key="hot-'))).toBe(false);
    // Every top-N gauge together: at most metricsTopN per rule and gauge.
    const consumption = await topSeries('quotafed_top_key_consumption');
    expect(consumption.filter((line) => line.includes('rule="per-key"'))).toHaveLength(3);
    expect(after.length + consumption.length).toBeLessThanOrEqual(3 * 2 * 2);
    // The sketch holds its capacity, no more, and still names the heaviest keys with exact counts.
    const view = (await (await top('rule=per-key&by=denials&n=64')).json()).rules[0];
    expect(view.entries.length).toBeLessThanOrEqual(64);
    expect(view.floor).toBeGreaterThan(0);
    expect(view.entries.slice(0, 3).map((e: { count: number; error: number }) => e.count - e.error)).toEqual([20, 20, 20]);
  });
});

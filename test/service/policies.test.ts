// The seed's worked policies through the running service: per API key 1,000/min, per key and endpoint
// /search 100/min and /checkout 10/min. Budgets are independent, and a denial by any rule consumes from none.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { awayFromWindowEdge, ruleOf, seedConfig } from './fixtures.ts';

interface CheckReply {
  allowed: boolean;
  status: number;
  outcomes: Array<{ rule: string; allowed: boolean; remaining: number; source: string }>;
}

describe('worked policies', async () => {
  const redis = await useRedis();
  let service: RegionService;

  beforeAll(async () => {
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        // Same limits as regions/us-east.yaml; the per-key bucket refills per day instead of per minute so
        // that its remaining count cannot drift up while the test runs (1,000/min refills 16 tokens a second).
        ruleOf(raw, 'per-key').period = '1d';
      }),
    );
  });
  afterAll(() => service?.close());

  const check = async (apiKey: string, path: string): Promise<CheckReply> => {
    const res = await fetch(`${service.url}/v1/check`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ apiKey, method: 'GET', path }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as CheckReply;
  };
  const remainingOf = (reply: CheckReply, rule: string) => reply.outcomes.find((o) => o.rule === rule)!.remaining;

  it('gives /search and /checkout independent budgets under one per-key budget', async () => {
    await awayFromWindowEdge();
    const key = 'key-budgets';
    const search: boolean[] = [];
    for (let i = 0; i < 105; i++) search.push((await check(key, '/search')).allowed);
    expect(search.filter(Boolean).length).toBe(100);
    expect(search.slice(100)).toEqual([false, false, false, false, false]);

    // /search exhausted, /checkout untouched.
    const checkout: CheckReply[] = [];
    for (let i = 0; i < 12; i++) checkout.push(await check(key, '/checkout'));
    expect(checkout.map((r) => r.allowed)).toEqual([...Array(10).fill(true), false, false]);
    expect(remainingOf(checkout[0]!, 'checkout')).toBe(9);
    expect(checkout[10]!.outcomes.find((o) => o.rule === 'checkout')!.allowed).toBe(false);

    // Other paths only see the per-key budget: 100 /search + 10 /checkout admitted so far.
    const other = await check(key, '/items/1');
    expect(other.allowed).toBe(true);
    expect(other.outcomes.map((o) => o.rule)).toEqual(['per-key']);
    expect(remainingOf(other, 'per-key')).toBe(1000 - 110 - 1);
  });

  it('consumes from no rule when any rule denies', async () => {
    await awayFromWindowEdge();
    const key = 'key-no-partial';
    for (let i = 0; i < 10; i++) expect((await check(key, '/checkout')).allowed).toBe(true);
    const before = remainingOf(await check(key, '/elsewhere'), 'per-key');

    // 20 denials by the checkout rule: the per-key bucket, which allowed each of them, must not pay.
    for (let i = 0; i < 20; i++) {
      const denied = await check(key, '/checkout');
      expect(denied.allowed).toBe(false);
      expect(denied.status).toBe(429);
      expect(denied.outcomes.find((o) => o.rule === 'checkout')!.allowed).toBe(false);
    }
    const after = remainingOf(await check(key, '/elsewhere'), 'per-key');
    expect(after).toBe(before - 1);
  });

  it('keeps keys of different callers apart', async () => {
    const a = await check('key-a', '/checkout');
    const b = await check('key-b', '/checkout');
    expect(remainingOf(a, 'checkout')).toBe(9);
    expect(remainingOf(b, 'checkout')).toBe(9);
  });
});

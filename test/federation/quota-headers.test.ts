// What a client reads in a federation: the three shipped regions (regions/*.yaml, what `npm start` runs) as
// real services on three redis-servers with real gossip. A fresh key's first request through us-east answers
// the federation's remaining quota (999 of 1,000), not us-east's third of it, in X-RateLimit-Remaining, the
// RateLimit field and /v1/check's JSON (which adds regionRemaining, us-east's own allowance); once another
// region's traffic has been gossiped, Remaining drops by it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import {
  SHIPPED_REGIONS,
  startShippedRegions,
  type RawConfig,
  type ShippedRegionOptions,
  type ShippedRegions,
} from '../support/shipped-regions.ts';
import { awayFromWindowEdge, eventually, startUpstream, type Upstream } from '../service/fixtures.ts';

type Raw = RawConfig;
const NAMES: string[] = [...SHIPPED_REGIONS];
const SECRET = 'quota-headers-secret-0123456789';

interface CheckJson {
  allowed: boolean;
  remaining: number | null;
  regionRemaining: number | null;
  headers: Record<string, string>;
  outcomes: Array<{ rule: string; remaining: number | null; regionRemaining: number | null }>;
}

describe('rate-limit headers in a three-region federation', async () => {
  const servers = await Promise.all(NAMES.map(() => useRedis()));
  const services = new Map<string, RegionService>();
  let upstream: Upstream;
  let regions: ShippedRegions | undefined;

  /** regions/<name>.yaml on this test's Redis servers and a free port, plus a 1,000/min fixed window on /fw. */
  const options = (upstreamUrl: string): ShippedRegionOptions => ({
    redisUrl: (region) => servers[NAMES.indexOf(region)]!.url,
    upstreamUrl,
    secret: SECRET,
    edit: (raw) => {
      (raw.rules as Raw[]).push({
        name: 'fw',
        match: { identity: 'apiKey', endpoints: ['/fw'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: 1000,
        period: '1m',
      });
    },
  });

  beforeAll(async () => {
    upstream = await startUpstream();
    regions = await startShippedRegions(options(upstream.url));
    for (const [name, service] of regions.services) services.set(name, service);
  });
  afterAll(async () => {
    await regions?.close();
    await upstream?.close();
  });

  const check = async (region: string, apiKey: string, path: string, cost = 1): Promise<CheckJson> => {
    const res = await fetch(`${services.get(region)!.url}/v1/check`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ apiKey, method: 'GET', path, cost }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as CheckJson;
  };
  const outcome = (json: CheckJson, rule: string) => json.outcomes.find((o) => o.rule === rule)!;

  it("a fresh key's first request through the gateway answers the federation's 999 of 1,000", async () => {
    await awayFromWindowEdge(60_000, 8_000);
    const res = await fetch(`${services.get('us-east')!.url}/orders`, { headers: { 'X-API-Key': 'fresh-gateway-key' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
    expect(res.headers.get('x-ratelimit-remaining')).toBe('999');
    expect(res.headers.get('ratelimit')).toMatch(/^"per-key";r=999;t=\d+$/);
  });

  for (const rule of ['per-key', 'fw']) {
    const algorithm = rule === 'fw' ? 'fixed window' : 'token bucket';
    it(`${algorithm}: /v1/check answers 999, then less by what another region admitted once it is gossiped`, async () => {
      await awayFromWindowEdge(60_000, 8_000);
      // /fw is decided by the fixed window and per-key; any other path by per-key alone.
      const path = rule === 'fw' ? '/fw' : '/orders';
      const key = `fresh-${rule}-${Math.random().toString(36).slice(2)}`;
      const first = await check('us-east', key, path);
      expect(first.allowed).toBe(true);
      expect(outcome(first, rule).remaining).toBe(999);
      // us-east's own allowance: a third of the limit plus its part of the 5 % budget, less this request.
      const own = outcome(first, rule).regionRemaining!;
      expect(own).toBeGreaterThan(300);
      expect(own).toBeLessThan(360);
      if (rule === 'per-key') {
        expect(first).toMatchObject({ remaining: 999, regionRemaining: own });
        expect(first.headers['X-RateLimit-Remaining']).toBe('999');
        expect(first.headers.RateLimit).toMatch(/^"per-key";r=999;t=\d+$/);
      } else {
        expect(first.headers.RateLimit).toMatch(/"fw";r=999;t=\d+/);
      }

      // eu-west admits 320: within its own share but above 90% of it, so the key turns loud there and us-east
      // learns of it through gossip (a key far below every region's share is silent: admission-gossip.ts).
      expect((await check('eu-west', key, path, 320)).allowed).toBe(true);
      let sent = 1;
      // Before the gossip arrives: 1,000 less us-east's own; after: less eu-west's 320 as well.
      const answers: Array<{ allowed: boolean; remaining: number | null; before: number; after: number }> = [];
      const after = await eventually(
        async () => {
          const json = await check('us-east', key, path);
          sent++;
          const remaining = outcome(json, rule).remaining;
          answers.push({ allowed: json.allowed, remaining, before: 1000 - sent, after: 1000 - 320 - sent });
          return remaining === 1000 - 320 - sent ? json : undefined;
        },
        10_000,
        "us-east's view of eu-west's 320",
        100,
      );
      for (const answer of answers) {
        expect(answer.allowed).toBe(true);
        expect([answer.before, answer.after]).toContain(answer.remaining);
      }
      // Never less than what us-east can admit itself.
      expect(outcome(after, rule).remaining!).toBeGreaterThanOrEqual(outcome(after, rule).regionRemaining!);
      if (rule === 'per-key') expect(after.headers['X-RateLimit-Remaining']).toBe(String(1000 - 320 - sent));
    });
  }
});

// Peek and reset in a three-region federation: the shipped regions (regions/*.yaml) as real services on three
// redis-servers with real gossip. `"consume": false` on POST /v1/check answers the decision with the same
// headers and writes nothing (no state key, no gossip mark, no count); POST /admin/keys/reset deletes the state a
// request is counted against in this region, or with `"federation": true` in every region, and says so.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, fixedWindow } from '../../src/index.ts';
import { ruleKey } from '../../src/keys.ts';
import type { RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import {
  SHIPPED_REGIONS,
  startShippedRegions,
  type RawConfig,
  type ShippedRegionOptions,
  type ShippedRegions,
} from '../support/shipped-regions.ts';
import { stateFields } from '../support/state-key.ts';
import { awayFromWindowEdge, startUpstream, type Upstream } from '../service/fixtures.ts';

type Raw = RawConfig;
const NAMES: string[] = [...SHIPPED_REGIONS];
const SECRET = 'peek-reset-secret-0123456789';
const TOKEN = 'peek-reset-admin-token-0123456789';

interface CheckJson {
  allowed: boolean;
  status: number;
  remaining: number | null;
  regionRemaining: number | null;
  consumed?: boolean;
  headers: Record<string, string>;
}

describe('peek and reset in a three-region federation', async () => {
  const servers = await Promise.all(NAMES.map(() => useRedis()));
  const redis = servers.map((server) => new Redis(server.url));
  const services = new Map<string, RegionService>();
  let upstream: Upstream;
  let regions: ShippedRegions | undefined;

  const options = (upstreamUrl: string): ShippedRegionOptions => ({
    redisUrl: (region) => servers[NAMES.indexOf(region)]!.url,
    upstreamUrl,
    secret: SECRET,
    edit: (raw) => {
      raw.admin = { token: TOKEN };
      // One fixed window of 30 per minute per key on /fw, ahead of the shipped rules (which match every path).
      (raw.rules as Raw[]).unshift({
        name: 'fw',
        match: { identity: 'apiKey', endpoints: ['/fw'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: 30,
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
    await Promise.all(redis.map((client) => client.quit()));
  });

  const post = async (region: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${services.get(region)!.url}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const check = async (region: string, apiKey: string, consume?: boolean): Promise<CheckJson> => {
    const res = await post(region, '/v1/check', { apiKey, method: 'GET', path: '/fw', ...(consume === undefined ? {} : { consume }) });
    expect(res.status).toBe(200);
    return (await res.json()) as CheckJson;
  };
  const reset = (region: string, body: Raw) => post(region, '/admin/keys/reset', body, { Authorization: `Bearer ${TOKEN}` });
  /** Whether a region holds the fw rule's state for this API key (a reset leaves only its mark, field r). */
  const holds = async (client: Redis, apiKey: string) =>
    Object.keys(await stateFields(client, ruleKey('fw', { principal: apiKey, dimensions: [apiKey] }))).some((field) => field !== 'r');
  const metric = async (region: string, name: string) => {
    const text = await (await fetch(`${services.get(region)!.url}/metrics`)).text();
    return text.split('\n').filter((line) => line.startsWith(name));
  };

  it('"consume": false answers the decision with the same headers and writes nothing anywhere', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    const peeks = await Promise.all([1, 2, 3].map(() => check('us-east', 'peek-key', false)));
    for (const peek of peeks) {
      expect(peek.allowed).toBe(true);
      expect(peek.consumed).toBe(false);
      // What a real first request would answer: the federation's 29 of 30 after it.
      expect(peek.remaining).toBe(29);
      expect(peek.headers['X-RateLimit-Remaining']).toBe('29');
    }
    // No state key in any region, nothing pending for the peers.
    for (const client of redis) expect(await holds(client, 'peek-key')).toBe(false);
    expect(await redis[0]!.keys('qf:{s*}:p:*')).toEqual([]);

    const spent = await check('us-east', 'peek-key');
    expect(spent.allowed).toBe(true);
    expect(spent.consumed).toBeUndefined();
    // The same headers (the reset countdown may have ticked a second between the two).
    for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'RateLimit-Policy']) {
      expect(spent.headers[name], name).toBe(peeks[0]!.headers[name]);
    }
    const after = await check('us-east', 'peek-key', false);
    expect(after.remaining).toBe(28);
    expect(await holds(redis[0]!, 'peek-key')).toBe(true);
    // Peeks are counted apart from decisions.
    expect((await metric('us-east', 'quotafed_peeks_total')).some((line) => line.includes('rule="fw"') && / 4$/.test(line))).toBe(true);
  });

  it('a peek of an exhausted key answers the denial and its Retry-After, and spends nothing', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    let admitted = 0;
    for (let i = 0; i < 40; i++) if ((await check('us-east', 'exhausted-key')).allowed) admitted++;
    expect(admitted).toBeGreaterThanOrEqual(10); // us-east's allowance at least (30 + 5% over three regions)
    expect(admitted).toBeLessThanOrEqual(31);
    const peek = await check('us-east', 'exhausted-key', false);
    expect(peek.allowed).toBe(false);
    expect(peek.status).toBe(429);
    expect(Number(peek.headers['Retry-After'])).toBeGreaterThan(0);
  });

  it('POST /admin/keys/reset clears the key in this region only, or in every region with "federation": true', async () => {
    await awayFromWindowEdge(60_000, 8_000);
    // Spend from two regions so each holds a state key.
    for (let i = 0; i < 5; i++) await check('us-east', 'reset-key');
    for (let i = 0; i < 5; i++) await check('eu-west', 'reset-key');
    for (const client of redis.slice(0, 2)) expect(await holds(client, 'reset-key')).toBe(true);

    const local = await reset('eu-west', { apiKey: 'reset-key', method: 'GET', path: '/fw', rule: 'fw' });
    expect(local.status).toBe(200);
    const localJson = (await local.json()) as { scope: string; regions: { region: string; deleted: number }[]; complete: boolean };
    expect(localJson.scope).toBe('region');
    expect(localJson.regions).toEqual([{ region: 'eu-west', deleted: 1 }]);
    // us-east still holds its own: a region-only reset touches no other region. (eu-west may hear of the key
    // again from us-east's next gossip: the peers keep what they saw, docs/operations.md "Resetting a key".)
    expect(await holds(redis[0]!, 'reset-key')).toBe(true);

    const everywhere = await reset('us-east', { apiKey: 'reset-key', method: 'GET', path: '/fw', federation: true });
    expect(everywhere.status).toBe(200);
    const json = (await everywhere.json()) as {
      scope: string;
      rules: { rule: string; key: string }[];
      regions: { region: string; deleted: number; error?: string }[];
      complete: boolean;
    };
    expect(json.scope).toBe('federation');
    expect(json.complete).toBe(true);
    expect(json.rules.map((entry) => entry.rule)).toEqual(['fw', 'per-key']);
    expect(json.regions.map((entry) => entry.region).sort()).toEqual([...NAMES].sort());
    expect(json.regions.every((entry) => entry.error === undefined)).toBe(true);
    for (const [i, client] of redis.entries()) {
      const key = ruleKey('fw', { principal: 'reset-key', dimensions: ['reset-key'] });
      expect(await holds(client, 'reset-key'), `${NAMES[i]} ${JSON.stringify(await client.hgetall(key))} ${JSON.stringify(json)}`).toBe(
        false,
      );
    }
    // The key starts over: the federation's full remaining quota again.
    expect((await check('us-east', 'reset-key', false)).remaining).toBe(29);
    expect((await metric('us-east', 'quotafed_key_resets_total')).some((line) => line.includes('scope="federation"'))).toBe(true);
  });

  it('a reset of an exhausted key admits it again at once (the over-limit cache forgets it too)', async () => {
    await awayFromWindowEdge(60_000, 10_000);
    // Exhausted: denied, and still denied once a peer's grant (the denial is a false one while the peers hold
    // their shares) would have arrived.
    for (;;) {
      while ((await check('ap-south', 'cached-key')).allowed) {}
      await new Promise((resolve) => setTimeout(resolve, 300));
      if (!(await check('ap-south', 'cached-key')).allowed) break;
    }
    const res = await reset('ap-south', { apiKey: 'cached-key', method: 'GET', path: '/fw', rule: 'fw', federation: true });
    expect(res.status).toBe(200);
    expect((await check('ap-south', 'cached-key')).allowed).toBe(true);
  });

  it('refuses a bad reset with a 400 and a reason, and an unauthenticated one with a 401', async () => {
    const unknown = await reset('us-east', { apiKey: 'k', method: 'GET', path: '/fw', rule: 'nope' });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: string }).error).toContain('no rule named "nope"');
    const unmatched = await reset('us-east', { apiKey: 'k', method: 'GET', path: '/other', rule: 'fw' });
    expect(unmatched.status).toBe(400);
    const bad = await reset('us-east', { apiKey: 'k', path: '/fw' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain('method');
    const anonymous = await post('us-east', '/admin/keys/reset', { apiKey: 'k', method: 'GET', path: '/fw' });
    expect(anonymous.status).toBe(401);
  });

  it('the library peeks without spending', async () => {
    const limiter = createLimiter({ redis: redis[0]!, limit: fixedWindow(2, '1m'), name: 'library-peek' });
    expect((await limiter.peek('caller')).remaining).toBe(1);
    expect((await limiter.peek('caller')).remaining).toBe(1);
    expect((await limiter.limit('caller')).remaining).toBe(1);
    expect((await limiter.limit('caller')).remaining).toBe(0);
    const denied = await limiter.peek('caller');
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBeGreaterThan(0);
  });
});

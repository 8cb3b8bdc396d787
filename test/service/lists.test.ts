// Allow and deny lists end to end, against real services on a real redis-server: from the config (gateway,
// /v1/check, /v1/auth, Envoy's gRPC service), an allowed caller costing no decision call in Redis (INFO
// commandstats), IPv6 CIDRs on the full client address, the admin API (two processes of one region agree through
// Redis), policy reload, and the metrics.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { createRlsClient, type RlsClient } from '../../src/grpc/client.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { client, useRedis } from '../harness/redis.ts';
import { eventually, metricValue, startUpstream, type Upstream } from './fixtures.ts';

const TOKEN = 'lists-test-admin-token';
const admin = { authorization: `Bearer ${TOKEN}` };

describe('allow and deny lists', async () => {
  const redis = await useRedis();
  const plain = client(redis.url);
  const dir = mkdtempSync(join(tmpdir(), 'quotafed-lists-'));
  const path = join(dir, 'region.yaml');
  let upstream: Upstream;
  let service: RegionService;
  let second: RegionService;
  let rls: RlsClient;

  const writeConfig = (lists: Record<string, unknown>) =>
    writeFileSync(
      path,
      stringify({
        region: 'us-east',
        port: 0,
        redis: { url: redis.url, commandTimeoutMs: 2000 },
        upstream: { url: upstream.url },
        // The test's requests come from loopback and name their client in X-Forwarded-For.
        identity: { clientIp: { trustedProxies: ['loopback'] } },
        admin: { token: TOKEN },
        grpc: { port: 0 },
        logLevel: 'silent',
        lists: { refreshMs: 200, ...lists },
        rules: [
          { name: 'per-key', match: { identity: 'apiKey' }, algorithm: 'fixedWindow', limit: 2, period: '1h' },
          { name: 'per-ip', match: { identity: 'anonymous' }, by: ['ip'], algorithm: 'fixedWindow', limit: 2, period: '1h' },
          {
            name: 'edge',
            match: { envoy: { domain: 'edge', descriptor: [{ key: 'remote_address' }] } },
            algorithm: 'fixedWindow',
            limit: 2,
            period: '1h',
          },
        ],
      }),
    );

  beforeAll(async () => {
    upstream = await startUpstream();
    writeConfig({
      allow: [{ apiKey: 'internal-batch' }, { ip: '10.0.0.0/8' }],
      deny: [{ apiKey: 'leaked-key' }, { ip: '2001:db8:bad::/48', comment: 'scraper' }, { ip: '2001:db8:0:1::5' }],
    });
    service = await startRegionService(loadConfigFile(path, {}), { configPath: path, dashboard: false, federation: false });
    second = await startRegionService(loadConfigFile(path, {}), { dashboard: false, federation: false });
    rls = createRlsClient(service.grpcAddress!);
  });
  afterAll(async () => {
    rls?.close();
    await second?.close();
    await service?.close();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = (url: string, headers: Record<string, string>) => fetch(`${url}/items`, { headers });
  const check = async (url: string, body: Record<string, unknown>) => {
    const response = await fetch(`${url}/v1/check`, { method: 'POST', body: JSON.stringify({ method: 'GET', path: '/items', ...body }) });
    return (await response.json()) as { allowed: boolean; status: number; error?: string; list?: unknown; outcomes: unknown[] };
  };
  /** Decision calls Redis has run so far (FCALL, or EVALSHA/EVAL before the library loads). */
  const decisionCalls = async () => {
    const info = await plain.info('commandstats');
    let calls = 0;
    for (const match of info.matchAll(/^cmdstat_(fcall|evalsha|eval):calls=(\d+)/gm)) calls += Number(match[2]);
    return calls;
  };

  it('denies a config-listed caller with 403 and a JSON reason through the gateway; the upstream never sees it', async () => {
    const seen = upstream.seen.length;
    const byKey = await get(service.url, { 'x-api-key': 'leaked-key' });
    expect(byKey.status).toBe(403);
    expect(byKey.headers.get('content-type')).toBe('application/json');
    expect(byKey.headers.get('x-quotafed-list')).toBe('deny');
    expect(byKey.headers.get('x-ratelimit-limit')).toBeNull();
    expect(await byKey.json()).toEqual({ error: 'Forbidden', reason: 'this API key is on the deny list', list: 'deny', kind: 'apiKey' });

    const byIp = await get(service.url, { 'x-api-key': 'someone', 'x-forwarded-for': '2001:db8:bad:42::1' });
    expect(byIp.status).toBe(403);
    expect(await byIp.json()).toMatchObject({ reason: 'this client address is on the deny list', kind: 'ip' });
    expect(upstream.seen.length).toBe(seen);
  });

  it('matches the real IPv6 address: a neighbour in the same /64 is counted by the rules, not denied', async () => {
    const denied = await get(service.url, { 'x-forwarded-for': '2001:db8:0:1::5' });
    expect(denied.status).toBe(403);
    // 2001:db8:0:1::6 shares the /64 key of the per-ip rule with ::5, which was never counted (denied first).
    const neighbour = [
      await get(service.url, { 'x-forwarded-for': '2001:db8:0:1::6' }),
      await get(service.url, { 'x-forwarded-for': '2001:db8:0:1::7' }),
      await get(service.url, { 'x-forwarded-for': '2001:db8:0:1::8' }),
    ].map((r) => r.status);
    expect(neighbour).toEqual([200, 200, 429]);
  });

  it('lets an allowed caller skip every rule: no decision call reaches Redis', async () => {
    const before = await decisionCalls();
    const statuses: number[] = [];
    for (let i = 0; i < 10; i += 1) statuses.push((await get(service.url, { 'x-api-key': 'internal-batch' })).status);
    for (let i = 0; i < 5; i += 1) statuses.push((await get(service.url, { 'x-forwarded-for': '10.20.30.40' })).status);
    expect(statuses).toEqual(Array(15).fill(200));
    expect(await decisionCalls()).toBe(before);
    // A caller on no list is decided in Redis as before (limit 2).
    const other = [
      await get(service.url, { 'x-api-key': 'k1' }),
      await get(service.url, { 'x-api-key': 'k1' }),
      await get(service.url, { 'x-api-key': 'k1' }),
    ];
    expect(other.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(await decisionCalls()).toBeGreaterThan(before);
  });

  it('/v1/check keeps its decision body and says which list decided', async () => {
    const denied = await check(service.url, { apiKey: 'leaked-key' });
    expect(denied).toMatchObject({ allowed: false, status: 403, error: 'this API key is on the deny list', outcomes: [] });
    expect(denied.list).toEqual({ list: 'deny', kind: 'apiKey', source: 'config' });
    const byIp = await check(service.url, { apiKey: 'x', ip: '2001:db8:bad::9' });
    expect(byIp).toMatchObject({ allowed: false, status: 403, list: { kind: 'ip' } });
    const allowed = await check(service.url, { ip: '10.1.1.1' });
    expect(allowed).toMatchObject({ allowed: true, status: 200, list: { list: 'allow', kind: 'ip', source: 'config' } });
  });

  it('/v1/auth answers 403 marked X-Quotafed-List: deny, and 204 for an allowed caller', async () => {
    const auth = (headers: Record<string, string>) =>
      fetch(`${service.url}/v1/auth`, { headers: { 'x-original-uri': '/items', 'x-original-method': 'GET', ...headers } });
    const denied = await auth({ 'x-real-ip': '2001:db8:bad::1' });
    expect(denied.status).toBe(403);
    expect(denied.headers.get('x-quotafed-list')).toBe('deny');
    expect(await denied.json()).toMatchObject({ error: 'Forbidden', kind: 'ip' });
    const allowed = await auth({ 'x-api-key': 'internal-batch' });
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('x-quotafed-list')).toBe('allow');
  });

  it("Envoy's gRPC service answers a denied remote_address OVER_LIMIT with the list's reason", async () => {
    const denied = await rls.shouldRateLimit({
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'remote_address', value: '2001:db8:bad::3' }] }],
    });
    expect(denied.overall_code).toBe('OVER_LIMIT');
    expect(denied.statuses[0]!.code).toBe('OVER_LIMIT');
    expect(JSON.parse(Buffer.from(denied.raw_body).toString())).toMatchObject({ error: 'Forbidden', kind: 'ip' });
    const allowed = await rls.shouldRateLimit({
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.1' }] }],
    });
    expect(allowed.overall_code).toBe('OK');
    expect(allowed.statuses[0]!.code).toBe('OK');
  });

  it('admin entries go to Redis and every process of the region follows them', async () => {
    const unauthorized = await fetch(`${service.url}/admin/lists`);
    expect(unauthorized.status).toBe(401);

    const put = (list: string, body: unknown) =>
      fetch(`${service.url}/admin/lists/${list}`, { method: 'PUT', headers: admin, body: JSON.stringify(body) });
    const added = await put('deny', { ip: '198.51.100.0/24', comment: 'abuse ticket 7' });
    expect(added.status).toBe(201);
    expect(await added.json()).toEqual({ list: 'deny', entry: { ip: '198.51.100.0/24', comment: 'abuse ticket 7' }, added: true });
    // PUT again: the entry is replaced (200, not added twice).
    expect((await put('deny', { ip: '198.51.100.000/24', comment: 'abuse ticket 7' })).status).toBe(400);
    expect((await put('deny', { ip: '198.51.100.0/24', comment: 'abuse ticket 7' })).status).toBe(200);
    expect((await put('allow', { apiKey: 'partner-key' })).status).toBe(201);
    expect((await put('allow', { ip: '2001:DB8:AA::/48' })).status).toBe(201);

    const bad = await put('deny', { ip: '198.51.100.7/24' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'Invalid list entry', reasons: ['ip: host bits are set: did you mean 198.51.100.0/24?'] });
    expect((await put('maybe', { ip: '198.51.100.0/24' })).status).toBe(400);
    expect((await put('deny', { ip: '1.2.3.4', apiKey: 'x' })).status).toBe(400);

    expect(await plain.hget('qf:lists', 'deny:ip:198.51.100.0/24')).toContain('abuse ticket 7');
    // The process that took the write answers at once; the other one within lists.refreshMs (200 ms).
    expect((await get(service.url, { 'x-forwarded-for': '198.51.100.9' })).status).toBe(403);
    await eventually(async () => expect((await get(second.url, { 'x-forwarded-for': '198.51.100.10' })).status).toBe(403));
    // Wait for both allow entries themselves (a 200 alone may be the rules admitting before an entry arrived; a
    // refresh between the two writes brings the first one alone).
    await eventually(async () => {
      expect((await check(second.url, { apiKey: 'partner-key' })).list).toEqual({ list: 'allow', kind: 'apiKey', source: 'admin' });
      expect((await check(second.url, { apiKey: 'x', ip: '2001:db8:aa:1::1' })).list).toEqual({
        list: 'allow',
        kind: 'ip',
        source: 'admin',
      });
      return true;
    });
    const before = await decisionCalls();
    expect((await get(second.url, { 'x-api-key': 'partner-key' })).status).toBe(200);
    for (let i = 0; i < 4; i += 1) expect((await get(second.url, { 'x-api-key': 'partner-key' })).status).toBe(200);
    expect((await check(second.url, { apiKey: 'x', ip: '2001:db8:aa:1::1' })).list).toEqual({ list: 'allow', kind: 'ip', source: 'admin' });
    expect(await decisionCalls()).toBe(before);

    const listed = (await (await fetch(`${second.url}/admin/lists`, { headers: admin })).json()) as {
      allow: Array<Record<string, unknown>>;
      deny: Array<Record<string, unknown>>;
    };
    expect(listed.allow.map(({ addedAt: _a, ...entry }) => entry)).toEqual([
      { apiKey: 'internal-batch', source: 'config' },
      { ip: '10.0.0.0/8', source: 'config' },
      { apiKey: 'partner-key', source: 'admin' },
      { ip: '2001:db8:aa::/48', source: 'admin' },
    ]);
    expect(listed.deny.filter((entry) => entry.source === 'admin')).toEqual([
      { ip: '198.51.100.0/24', comment: 'abuse ticket 7', addedAt: expect.any(Number), source: 'admin' },
    ]);

    // DELETE names the entry; a CIDR's slash may be sent as it is or as %2F.
    const removed = await fetch(`${service.url}/admin/lists/deny/198.51.100.0%2F24`, { method: 'DELETE', headers: admin });
    expect(removed.status).toBe(200);
    expect(await removed.json()).toEqual({ list: 'deny', removed: [{ ip: '198.51.100.0/24', comment: 'abuse ticket 7' }] });
    expect((await fetch(`${service.url}/admin/lists/allow/2001:db8:aa::/48`, { method: 'DELETE', headers: admin })).status).toBe(200);
    expect((await fetch(`${service.url}/admin/lists/allow/partner-key`, { method: 'DELETE', headers: admin })).status).toBe(200);
    const missing = await fetch(`${service.url}/admin/lists/deny/203.0.113.1`, { method: 'DELETE', headers: admin });
    expect(missing.status).toBe(404);
    const inConfig = await fetch(`${service.url}/admin/lists/deny/leaked-key`, { method: 'DELETE', headers: admin });
    expect(inConfig.status).toBe(409);
    await eventually(async () => expect((await get(second.url, { 'x-forwarded-for': '198.51.100.11' })).status).toBe(200));
  });

  it('a policy reload puts new config lists in force', async () => {
    expect((await get(service.url, { 'x-api-key': 'reload-denied' })).status).toBe(200);
    writeConfig({ allow: [], deny: [{ apiKey: 'reload-denied' }] });
    const reload = await fetch(`${service.url}/admin/policy/reload`, { method: 'POST', headers: admin });
    expect(await reload.json()).toMatchObject({ ok: true, changed: true });
    expect((await get(service.url, { 'x-api-key': 'reload-denied' })).status).toBe(403);
    // internal-batch is no longer allowed: the rules count it again (limit 2 per hour).
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await get(service.url, { 'x-api-key': 'internal-batch' })).status);
    expect(statuses).toEqual([200, 200, 429]);
    // A bad entry is rejected naming its field; the lists in force stay.
    writeConfig({ deny: [{ ip: '10.0.0.1/8' }] });
    const rejected = (await (await fetch(`${service.url}/admin/policy/reload`, { method: 'POST', headers: admin })).json()) as {
      ok: boolean;
      fields: string[];
    };
    expect(rejected).toMatchObject({ ok: false, fields: ['lists.deny[0].ip'] });
    expect((await get(service.url, { 'x-api-key': 'reload-denied' })).status).toBe(403);
  });

  it('counts list decisions by list and entry kind, never by the key', async () => {
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(await metricValue(metrics, 'quotafed_list_matches_total', { list: 'deny', kind: 'apiKey' })).toBeGreaterThanOrEqual(2);
    expect(await metricValue(metrics, 'quotafed_list_matches_total', { list: 'deny', kind: 'ip' })).toBeGreaterThanOrEqual(4);
    expect(await metricValue(metrics, 'quotafed_list_matches_total', { list: 'allow', kind: 'apiKey' })).toBeGreaterThanOrEqual(10);
    expect(await metricValue(metrics, 'quotafed_list_matches_total', { list: 'allow', kind: 'ip' })).toBeGreaterThanOrEqual(5);
    expect(metrics).not.toContain('leaked-key');
    expect(metrics).not.toContain('internal-batch');
  });
});

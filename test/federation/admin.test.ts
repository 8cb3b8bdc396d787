// The admin routes of the federation on the real admin app: the per-key view and the per-peer status.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federationAdminRoutes } from '../../src/http/federation-admin.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { awayFromWindowEdge } from '../service/fixtures.ts';
import { eventually } from '../support/wait.ts';
import { createAdminApp } from '../../src/http/admin.ts';

const TOKEN = 'admin-token-0123456789abcdef';
let fed: TestFederation;
let a: TestRegion;
let b: TestRegion;

beforeAll(async () => {
  fed = await startTestFederation({
    names: ['a', 'b'],
    rules: [
      {
        name: 'per-key',
        match: { endpoints: ['/search'] },
        by: ['apiKey', 'endpoint'],
        algorithm: 'fixedWindow',
        limit: 100,
        period: '60s',
        leakageBudget: 10,
      },
      { name: 'bucket', match: { endpoints: ['/bucket'] }, by: ['apiKey'], algorithm: 'tokenBucket', limit: 100, period: '60s' },
    ],
  });
  [a, b] = fed.regions as [TestRegion, TestRegion];
});
afterAll(() => fed?.close());

const appOf = (region: TestRegion) =>
  createAdminApp({
    token: TOKEN,
    openWithoutToken: false,
    routes: [federationAdminRoutes({ config: region.config, redis: region.redis, status: () => region.federation!.status() })],
  });
const get = (region: TestRegion, path: string, token = TOKEN) =>
  appOf(region).request(path, { headers: { Authorization: `Bearer ${token}` } });

describe('GET /admin/federation/keys', () => {
  it("shows own consumption, each region's view, allowances, acknowledgement and backlog for one caller", async () => {
    // b keeps its last request until the window's last tenth (docs/federation.md §2) and the view below is of one
    // window: start clear of both.
    await awayFromWindowEdge(60_000, 6_000 + 12_000);
    for (let i = 0; i < 10; i++)
      expect((await a.engine.decide({ apiKey: 'alice', ip: '10.0.0.1', method: 'GET', path: '/search' })).allowed).toBe(true);
    const query = '/federation/keys?rule=per-key&apiKey=alice&endpoint=/search';
    const body = await eventually(
      async () => {
        const response = await get(a, query);
        const json = (await response.json()) as {
          windows: { current: boolean; acknowledged: number; allowance: Record<string, number> }[];
          pending: Record<string, number | null>;
        };
        // Learning b's grant (and the acknowledgement it carries) is itself a change a sends on (protocol.ts
        // mergeWindow): wait for that too. b acknowledges a's later admissions only with its next message (a merge
        // that gives nothing is not echoed to its sender), so the acknowledgement a sees is at least what b had
        // merged when it granted, not necessarily all 10.
        const current = json.windows.find((w) => w.current);
        return (current?.acknowledged ?? 0) >= 1 && current?.allowance.b === 1 && json.pending.b === null ? json : undefined;
      },
      10_000,
      'b to acknowledge, and a to deliver what it learned',
    );
    const current = (body as { windows: Record<string, unknown>[] }).windows.find((w) => w.current)! as Record<string, unknown> & {
      acknowledged: number;
      acknowledgedBy: Record<string, number>;
    };
    // limit 100, budget 10, two equal weights: 55 each. b, idle (a free donor), gave a all but one request
    // when it first merged a's admissions (the same gossip that carries its acknowledgement).
    expect(current).toMatchObject({
      own: 10,
      consumption: { a: 10, b: 0 },
      globalView: 10,
      allowance: { a: 109, b: 1 },
      fenced: false,
    });
    expect(current.acknowledgedBy.b).toBe(current.acknowledged);
    expect(current.acknowledged).toBeGreaterThanOrEqual(1);
    expect(current.acknowledged).toBeLessThanOrEqual(10);
    expect(body).toMatchObject({ rule: 'per-key', algorithm: 'fixedWindow', region: 'a', exists: true, fence: 0, pending: { b: null } });

    const fromB = (await (await get(b, query)).json()) as { windows: Record<string, unknown>[] };
    expect(fromB.windows.find((w) => w.current)).toMatchObject({ own: 0, consumption: { a: 10, b: 0 } });
  });

  it('shows token-bucket share units and fields', async () => {
    expect((await b.engine.decide({ apiKey: 'bob', ip: '10.0.0.2', method: 'GET', path: '/bucket' })).allowed).toBe(true);
    const body = (await (await get(b, '/federation/keys?rule=bucket&apiKey=bob&endpoint=/bucket')).json()) as Record<string, unknown>;
    expect(body.bucket).toMatchObject({ shareUnits: 500_000 });
    expect((body.windows as Record<string, unknown>[])[0]).toMatchObject({ own: 1, allowance: { a: 500_000, b: 500_000 } });
  });

  it('answers 400 for bad queries, 404 for unknown rules or callers the rule does not cover, 401 without the token', async () => {
    expect((await get(a, '/federation/keys')).status).toBe(400);
    expect((await get(a, '/federation/keys?rule=per-key&method=G3T')).status).toBe(400);
    expect((await get(a, '/federation/keys?rule=nope&apiKey=x')).status).toBe(404);
    expect((await get(a, '/federation/keys?rule=per-key&apiKey=x&endpoint=/other')).status).toBe(404);
    expect((await get(a, '/federation/keys?rule=per-key&apiKey=alice&endpoint=/search', 'wrong-token-0123456789')).status).toBe(401);
  });
});

describe('GET /admin/federation/peers', () => {
  it('lists each peer with link state, last heard and backlog', async () => {
    // Rounds run concurrently in both regions, and a merge (a grant, an acknowledgement) makes a key pending
    // again: flush until a round found nothing left for b.
    type Peers = { region: string; regions: string[]; peers: Record<string, unknown>[] };
    const body = await eventually(
      async () => {
        await fed.flushAll();
        const view = (await (await get(a, '/federation/peers')).json()) as Peers;
        return view.peers[0]?.backlog === 0 ? view : undefined;
      },
      10_000,
      'an empty backlog for b',
    );
    expect(body.region).toBe('a');
    expect(body.regions).toEqual(['a', 'b']);
    expect(body.peers).toHaveLength(1);
    expect(body.peers[0]).toMatchObject({ name: 'b', index: 1, linkUp: true, backlog: 0 });
    expect(typeof body.peers[0]!.lastHeardAt).toBe('number');
    expect(JSON.stringify(body)).not.toMatch(/redis:\/\//);
  });
});

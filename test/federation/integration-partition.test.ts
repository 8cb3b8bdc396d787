// A partition staged with TCP proxies on every gossip link: region c is cut off from a and b (both
// directions) while all three keep serving. The cut-off region admits within its escrow allowance, the
// connected ones within theirs; Σ admitted per window stays ≤ L + B; backlogs grow during the cut and drain
// after the heal, and every region converges to one global view.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federationKeyView } from '../../src/federation/admin-view.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { awayFromWindowEdge } from '../service/fixtures.ts';
import { eventually } from '../support/wait.ts';

const LIMIT = 300;
const BUDGET = 15;
const PERIOD = 30_000;
let fed: TestFederation;

beforeAll(async () => {
  fed = await startTestFederation({
    proxies: true,
    syncIntervalMs: 50,
    rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: LIMIT, period: PERIOD, leakageBudget: BUDGET }],
  });
});
afterAll(() => fed?.close());

const request = (key: string) => ({ apiKey: key, ip: '10.0.0.1', method: 'GET', path: '/' });

async function admit(region: TestRegion, key: string, count: number, tally: Map<number, Map<string, number>>): Promise<void> {
  for (let i = 0; i < count; i++) {
    const decision = await region.engine.decide(request(key));
    if (!decision.allowed) continue;
    const end = decision.binding!.resetAtMs;
    const perRegion = tally.get(end) ?? new Map<string, number>();
    perRegion.set(region.name, (perRegion.get(region.name) ?? 0) + 1);
    tally.set(end, perRegion);
  }
}

describe('partition', () => {
  it('keeps both sides serving within their allowances, bounds the total, and converges after the heal', async () => {
    const key = `partitioned-${Math.random().toString(36).slice(2)}`;
    const [a, b, c] = fed.regions as [TestRegion, TestRegion, TestRegion];
    const tally = new Map<number, Map<string, number>>();
    // A quiet region gives all but one request of its share to an admitting peer, and that last one too in the
    // window's final tenth (docs/federation.md §2): start well before it, so c still holds its one at the cut.
    await awayFromWindowEdge(PERIOD, PERIOD / 10 + 10_000);
    await admit(a, key, 10, tally);
    await eventually(
      async () => (await federationKeyView(c.config, c.redis, 'fw', { apiKey: key })).windows.some((w) => w.consumption.a === 10),
      10_000,
      'c to see a before the cut',
    );

    fed.isolate('c');
    try {
      // Everyone wants far more than the limit.
      await Promise.all([admit(a, key, 250, tally), admit(b, key, 250, tally), admit(c, key, 250, tally)]);
      await Promise.all(fed.regions.map((region) => region.federation!.flush()));
      const fromA = a.federation!.status().find((peer) => peer.name === 'c')!;
      const fromC = c.federation!.status();
      expect(fromA.linkUp).toBe(false);
      expect(fromA.backlog).toBeGreaterThan(0);
      expect(fromC.every((peer) => peer.linkUp === false && peer.backlog > 0)).toBe(true);
    } finally {
      fed.heal('c');
    }

    for (const [end, perRegion] of tally) {
      const total = [...perRegion.values()].reduce((sum, count) => sum + count, 0);
      expect(total, `window ending ${end}: ${JSON.stringify([...perRegion])}`).toBeLessThanOrEqual(LIMIT + BUDGET);
      // The cut-off region kept serving, within its own share of the window.
      const id = end / PERIOD - 1;
      const own = await federationKeyView(c.config, c.redis, 'fw', { apiKey: key });
      const window = own.windows.find((w) => w.id === id);
      if (window) expect(window.own).toBeLessThanOrEqual(window.allowance.c!);
    }
    const cAdmitted = [...tally.values()].reduce((sum, perRegion) => sum + (perRegion.get('c') ?? 0), 0);
    expect(cAdmitted).toBeGreaterThan(0);

    // After the heal: one global view everywhere, and the backlogs drain.
    const views = await eventually(
      async () => {
        const all = await Promise.all(fed.regions.map((region) => federationKeyView(region.config, region.redis, 'fw', { apiKey: key })));
        const shapes = all.map((view) => JSON.stringify(view.windows.map((w) => [w.id, w.consumption])));
        return shapes.every((shape) => shape === shapes[0]) ? all : undefined;
      },
      15_000,
      'all regions to converge after the heal',
    );
    for (const window of views[0]!.windows) {
      const perRegion = tally.get(window.endMs);
      if (perRegion)
        expect(window.consumption).toEqual({ a: perRegion.get('a') ?? 0, b: perRegion.get('b') ?? 0, c: perRegion.get('c') ?? 0 });
    }
    await eventually(
      async () =>
        fed.regions.every((region) => region.federation!.status().every((peer) => peer.linkUp && peer.backlog === 0)) || undefined,
      15_000,
      'links up, backlogs drained',
    );
  }, 60_000);
});

// Every region of a federation loses its data together (issue 21, item 7): all three stop, every redis-server
// restarts empty, all three start again. Each asks its peers whether they have heard of it; every peer answers
// "never", but every peer is itself new, so the silence proves nothing and each region fences the current
// windows instead of starting fresh (which admitted another L + B in a window already spent). The declaration of a
// brand-new federation (`bootstrap: new`, `--new-federation`) is what starts fresh, as on the first start.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heardField } from '../../src/federation/gossip/apply.ts';
import { vouchAfterMs } from '../../src/federation/recovery.ts';
import { layoutOf } from '../../src/keys.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';

const PERIOD = 60_000;
const LIMIT = 30;
const BUDGET = 3;
let fed: TestFederation;

beforeAll(async () => {
  fed = await startTestFederation({
    syncIntervalMs: 50,
    rules: [
      {
        name: 'fw',
        match: { endpoints: ['/fw'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: LIMIT,
        period: PERIOD,
        leakageBudget: BUDGET,
      },
    ],
  });
});
afterAll(() => fed?.close());

const request = (apiKey: string) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/fw' });

async function admitAll(regions: readonly TestRegion[], apiKey: string, tries: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < tries; i++) for (const region of regions) if ((await region.engine.decide(request(apiKey))).allowed) admitted++;
  return admitted;
}

async function wipeAndRestartAll(regions: readonly TestRegion[]): Promise<void> {
  for (const region of regions) await region.stopFederation();
  // A correlated loss: every Redis comes back empty (FLUSHALL stands in for restarts without persistence).
  await Promise.all(regions.map((region) => region.redis.flushall()));
  await Promise.all(regions.map((region) => region.startFederation()));
  restartedAt = Date.now();
}
let restartedAt = 0;

describe('every region loses its data together', { timeout: 60_000 }, () => {
  it('the regions fence the current windows at start-up: the window admits at most L + B across the loss', async () => {
    const regions = fed.regions;
    // Stay clear of the window's end: the loss and the restarts happen inside one window.
    if (Date.now() % PERIOD > PERIOD - 20_000) await new Promise((resolve) => setTimeout(resolve, PERIOD - (Date.now() % PERIOD) + 50));
    const windowEnd = Math.floor(Date.now() / PERIOD) * PERIOD + PERIOD;
    const apiKey = `correlated-${Math.random().toString(36).slice(2)}`;
    const before = await admitAll(regions, apiKey, LIMIT);
    expect(before).toBeGreaterThan(LIMIT - 3);
    await wipeAndRestartAll(regions);
    for (const region of regions) {
      expect(region.federation!.recovery, region.name).toMatchObject({ fenced: true });
      expect(region.federation!.recovery!.reason).toContain('is new as well');
    }
    const after = await admitAll(regions, apiKey, LIMIT);
    expect(Date.now()).toBeLessThan(windowEnd);
    expect(before + after).toBeLessThanOrEqual(LIMIT + BUDGET);
    expect(after).toBe(0);
  });

  it('peers that have run with their state intact for a few heartbeats vouch: their "never" starts a region fresh', async () => {
    const [a, b, c] = fed.regions as [TestRegion, TestRegion, TestRegion];
    // b and c have run since the restart above. Once they have run for vouchAfterMs, a alone loses its data, and b
    // and c are made to have never heard of it (as for a region configured in a running federation that never ran).
    const waitMs = restartedAt + vouchAfterMs(a.config) + 500 - Date.now();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    await a.stopFederation();
    await a.redis.flushall();
    await Promise.all([b, c].map((peer) => peer.redis.hdel(layoutOf(peer.config).metaKey, heardField(a.name))));
    await a.startFederation();
    expect(a.federation!.recovery).toMatchObject({ fenced: false, answers: { b: 'never', c: 'never' } });
    expect((await a.engine.decide(request(`vouched-${Math.random().toString(36).slice(2)}`))).allowed).toBe(true);
  });
});

// rules[].maxWaitMs in a real two-region federation (two redis-server processes, real BullMQ gossip, the real
// engine behind the resilient wrapper the service uses): a false denial is parked while the key's state goes to
// the peer on the fast lane, and admitted when the peer's grant arrives; a true denial (the federation is at
// its limit) and a rule without maxWaitMs answer at once.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createResilientEngine, type ResilientEngine } from '../../src/engine/resilient.ts';
import { silentLogger } from '../../src/log.ts';
import { parkedTotal } from '../../src/metrics.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';

const LIMIT = 100;
const PERIOD = 30_000;
const rule = (name: string, maxWaitMs?: number) => ({
  name,
  match: { endpoints: [`/${name}`] },
  by: ['apiKey' as const],
  algorithm: 'fixedWindow' as const,
  limit: LIMIT,
  period: '30s',
  leakageBudget: '5%',
  ...(maxWaitMs !== undefined ? { maxWaitMs } : {}),
});

let fed: TestFederation;
beforeAll(async () => {
  fed = await startTestFederation({
    names: ['a', 'b'],
    syncIntervalMs: 50,
    rules: [rule('wait', 4_000), rule('short', 300), rule('nowait')],
  });
});
afterAll(() => fed?.close());

const resilient = (region: TestRegion): ResilientEngine =>
  createResilientEngine({ config: region.config, inner: region.engine, probe: () => region.redis.ping(), logger: silentLogger() });
const parked = async (outcome: 'admitted' | 'denied') =>
  (await parkedTotal.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

it('parks a false denial until the peer grants, and never a true denial or a rule without maxWaitMs', async () => {
  // A whole case inside one window: start in the first half of one.
  if (Date.now() % PERIOD > PERIOD / 2) await new Promise((resolve) => setTimeout(resolve, PERIOD - (Date.now() % PERIOD) + 20));
  const windowEnd = Math.floor(Date.now() / PERIOD) * PERIOD + PERIOD;
  const a = resilient(fed.region('a'));
  const apiKey = `caller-${Math.random().toString(36).slice(2)}`;
  const request = (path: string) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path });

  // b's gossip worker is stopped: a's state waits in b's queue and no grant can come back.
  await fed.region('b').stopFederation();
  const admit = async (path: string) => {
    let admitted = 0;
    for (;;) {
      const decision = await a.decide(request(path));
      if (!decision.allowed) return { admitted, decision };
      admitted++;
    }
  };
  // Without maxWaitMs: a admits its base share, then a false denial answers at once.
  const before = { admitted: await parked('admitted'), denied: await parked('denied') };
  const nowait = await admit('/nowait');
  expect(nowait.admitted).toBeGreaterThan(0);
  expect(nowait.admitted).toBeLessThan(LIMIT);
  expect(nowait.decision.binding?.falseDenial).toBe(true);
  expect(await parked('denied')).toBe(before.denied);

  // With maxWaitMs and no grant possible: the false denial is parked for the whole wait, then denied.
  const short = await admit('/short');
  expect(short.admitted).toBe(nowait.admitted);
  expect(short.decision.binding?.falseDenial).toBe(true);
  expect(await parked('denied')).toBe(before.denied + 1);
  expect(await parked('admitted')).toBe(before.admitted);

  // The same share on the 4 s rule; the next request is parked, and b's worker starts meanwhile: b (idle) reads
  // a's state, grants on the fast lane, and the parked request is admitted.
  for (let i = 0; i < nowait.admitted; i++) expect((await a.decide(request('/wait'))).allowed).toBe(true);
  const parkedRequest = a.decide(request('/wait'));
  await fed.region('b').startFederation();
  const resumed = await parkedRequest;
  expect(resumed.allowed).toBe(true);
  expect(await parked('admitted')).toBe(before.admitted + 1);

  // The rest of the limit, one request at a time (any false denial on the way waits for b's grant), then a true
  // denial: the federation is at its limit, so it answers at once, unparked.
  const rest = await admit('/wait');
  expect(Date.now()).toBeLessThan(windowEnd);
  expect(nowait.admitted + 1 + rest.admitted).toBeGreaterThanOrEqual(LIMIT);
  expect(rest.decision.binding?.falseDenial ?? false).toBe(false);
  const deniedSoFar = await parked('denied');
  expect((await a.decide(request('/wait'))).allowed).toBe(false);
  expect(await parked('denied')).toBe(deniedSoFar);
}, 60_000);

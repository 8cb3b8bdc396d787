// False denials in a real two-region federation (two redis-server processes, real BullMQ gossip, the real
// engine): a region that gave its allowance away is denied by its own share while its view of the window still
// shows global headroom, and quotafed_federation_false_denials_total{rule} counts exactly that.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { federationKeyView } from '../../src/federation/admin-view.ts';
import { falseDenialsTotal, timeToGrantSeconds } from '../../src/metrics.ts';
import { REPORT_STEP } from '../../src/protocol/index.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';

const LIMIT = 100;
const PERIOD = 20_000;
let fed: TestFederation;

beforeAll(async () => {
  fed = await startTestFederation({
    names: ['a', 'b'],
    syncIntervalMs: 50,
    rules: [
      {
        name: 'fd',
        match: { endpoints: ['/fd'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: LIMIT,
        period: '20s',
        leakageBudget: '5%',
      },
    ],
  });
});
afterAll(() => fed?.close());

const API_KEY = `caller-${Math.random().toString(36).slice(2)}`;
const request = { apiKey: API_KEY, ip: '10.0.0.1', method: 'GET', path: '/fd' };
const currentWindow = async (region: TestRegion) =>
  (await federationKeyView(region.config, region.redis, 'fd', { apiKey: API_KEY, endpoint: '/fd' })).windows.find((w) => w.current);
const granted = async () =>
  (await timeToGrantSeconds.get()).values.find((v) => v.labels.rule === 'fd' && v.metricName?.endsWith('_count'))?.value ?? 0;
const counted = async () => (await falseDenialsTotal.get()).values.find((v) => v.labels.rule === 'fd')?.value ?? 0;

it('a region that gave its share away and is denied while its view has headroom counts a false denial', async () => {
  const [a, b] = [fed.region('a'), fed.region('b')];
  // Start clear of the window's last part (a quiet region gives its last request away there, by design).
  if (Date.now() % PERIOD > PERIOD / 2) await new Promise((resolve) => setTimeout(resolve, PERIOD - (Date.now() % PERIOD) + 20));
  const windowEnd = Math.floor(Date.now() / PERIOD) * PERIOD + PERIOD;

  // a takes the traffic until b has granted it allowance, then stops: a holds granted allowance it has not used.
  let admittedA = 0;
  for (let i = 0; i < LIMIT && Date.now() < windowEnd - 5_000; i++) {
    if ((await a.engine.decide(request)).allowed) admittedA++;
    const given = (await currentWindow(a))?.transfers.find((t) => t.from === 'b' && t.to === 'a')?.amount ?? 0;
    if (given > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(admittedA).toBeGreaterThan(0);
  expect(admittedA).toBeLessThan(LIMIT);
  // b sees a's admissions before it decides, to within one report step (a reports its count at each step of 2% of
  // its allowance, at most L + B here: docs/federation.md §2).
  const step = Math.max(1, Math.floor(REPORT_STEP * (LIMIT * 1.05)));
  await eventually(async () => expect((await currentWindow(b))?.consumption.a).toBeGreaterThan(admittedA - step));
  expect(await counted()).toBe(0);

  // b spends what it kept; its first denial comes from its own allowance while G + 1 <= L in its view.
  let denial: Awaited<ReturnType<typeof b.engine.decide>> | undefined;
  for (let i = 0; i < LIMIT && !denial; i++) {
    const decision = await b.engine.decide(request);
    if (!decision.allowed) denial = decision;
  }
  expect(Date.now()).toBeLessThan(windowEnd);
  expect(denial?.binding?.falseDenial).toBe(true);
  const seen = (await currentWindow(b))!;
  const global = Object.values(seen.consumption).reduce((sum, c) => sum + c, 0);
  expect(global + 1).toBeLessThanOrEqual(LIMIT);
  expect(await counted()).toBe(1);

  // Another denial at b with the same view counts again; an admission at a (it holds allowance) counts nothing.
  expect((await b.engine.decide(request)).allowed).toBe(false);
  expect(await counted()).toBe(2);
  expect((await a.engine.decide(request)).allowed).toBe(true);
  expect(await counted()).toBe(2);

  // a holds a surplus and b is hungry: a grants, b is admitted again in the window, and the time from b's
  // first false denial to that admission is observed once.
  expect(await granted()).toBe(0);
  let readmitted = false;
  while (!readmitted && Date.now() < windowEnd - 200) {
    readmitted = (await b.engine.decide(request)).allowed;
    if (!readmitted) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(readmitted).toBe(true);
  expect(await granted()).toBe(1);
}, 40_000);

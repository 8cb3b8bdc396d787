// Three real regions (three redis-server processes, real BullMQ workers and publishers, the real decision
// engine): convergence, idempotence under replayed and reordered jobs, restart without loss, demand following.
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federationKeyView } from '../../src/federation/admin-view.ts';
import { GOSSIP_QUEUE } from '../../src/federation/gossip/worker.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';
import { stateFields } from '../support/state-key.ts';
import { GOSSIP_QUEUE_PREFIX, ruleKey } from '../../src/keys.ts';

let fed: TestFederation;
const SECRET = 'integration-secret-0123456789';

beforeAll(async () => {
  fed = await startTestFederation({
    secret: SECRET,
    syncIntervalMs: 50,
    rules: [
      // One path per rule (plus /both for sw and tb), so a request is decided by the rule under test only.
      {
        name: 'fw',
        match: { endpoints: ['/fw'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: 300,
        period: '1h',
        leakageBudget: '5%',
      },
      {
        name: 'demand',
        match: { endpoints: ['/demand'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: 300,
        period: '10s',
        leakageBudget: '5%',
      },
      { name: 'sw', match: { endpoints: ['/both'] }, by: ['apiKey'], algorithm: 'slidingWindow', limit: 100, period: '1h' },
      { name: 'tb', match: { endpoints: ['/both'] }, by: ['apiKey'], algorithm: 'tokenBucket', limit: 100, period: '1h' },
    ],
  });
});
afterAll(() => fed?.close());

let seq = 0;
const apiKey = () => `caller-${++seq}-${Math.random().toString(36).slice(2)}`;
const request = (key: string, path = '/fw') => ({ apiKey: key, ip: '10.0.0.1', method: 'GET', path });

// The requests go out together, so Redis decides them back to back: a key far below its share is gossiped only
// while it runs fast (src/protocol/admission-gossip.ts), and one-by-one decisions on a loaded machine can be
// spaced widely enough to leave the last of them silent, never reaching the peers these tests watch.
async function admit(region: TestRegion, key: string, count: number, path = '/fw'): Promise<number> {
  const decisions = await Promise.all(Array.from({ length: count }, () => region.engine.decide(request(key, path))));
  return decisions.filter((decision) => decision.allowed).length;
}

const pathOf = (rule: string) => (rule === 'sw' || rule === 'tb' ? '/both' : `/${rule}`);
const view = (region: TestRegion, rule: string, key: string) =>
  federationKeyView(region.config, region.redis, rule, { apiKey: key, endpoint: pathOf(rule) });
const currentWindow = async (region: TestRegion, rule: string, key: string) =>
  (await view(region, rule, key)).windows.find((w) => w.current);

describe('convergence', () => {
  it('admissions in one region become visible in the others', async () => {
    const key = apiKey();
    const a = fed.region('a');
    expect(await admit(a, key, 10)).toBe(10);
    for (const name of ['b', 'c']) {
      const window = await eventually(
        async () => {
          const w = await currentWindow(fed.region(name), 'fw', key);
          return w && w.consumption.a === 10 ? w : undefined;
        },
        10_000,
        `${name} to see a's 10 admissions`,
      );
      expect(window.globalView).toBe(10);
      expect(window.own).toBe(0);
    }
    // And a learns that both peers acknowledged its 10.
    const acked = await eventually(
      async () => {
        const w = await currentWindow(a, 'fw', key);
        return w && w.acknowledged === 10 ? w : undefined;
      },
      10_000,
      'a to see both acknowledgements',
    );
    expect(acked.acknowledgedBy).toEqual({ b: 10, c: 10 });
    const status = a.federation!.status();
    expect(status.map((peer) => peer.linkUp)).toEqual([true, true]);
  });

  it('every region converges to one global view when all admit', async () => {
    const key = apiKey();
    const counts = { a: 12, b: 10, c: 9 };
    await Promise.all(Object.entries(counts).map(([name, count]) => admit(fed.region(name), key, count)));
    for (const region of fed.regions) {
      await eventually(
        async () => {
          const w = await currentWindow(region, 'fw', key);
          return w && w.consumption.a === 12 && w.consumption.b === 10 && w.consumption.c === 9;
        },
        10_000,
        `${region.name} to converge`,
      );
    }
  });

  it('token buckets and sliding windows federate too', async () => {
    const key = apiKey();
    expect(await admit(fed.region('b'), key, 10, '/both')).toBe(10);
    for (const name of ['a', 'c']) {
      await eventually(
        async () => {
          const [sw, tb] = await Promise.all([currentWindow(fed.region(name), 'sw', key), currentWindow(fed.region(name), 'tb', key)]);
          return sw?.consumption.b === 10 && tb?.consumption.b === 10;
        },
        10_000,
        `${name} to see b's sliding-window and token-bucket consumption`,
      );
    }
  });
});

async function stateOf(region: TestRegion, rule: string, key: string): Promise<Record<string, string>> {
  const matched = ruleKey(rule, { principal: key, dimensions: [key] });
  return stateFields(region.redis, matched);
}

describe('idempotence', () => {
  it('replayed jobs are rejected, and re-signed shuffled duplicates change nothing', async () => {
    const key = apiKey();
    await admit(fed.region('a'), key, 12);
    await admit(fed.region('c'), key, 2);
    const b = fed.region('b');
    await eventually(
      async () => {
        const w = await currentWindow(b, 'fw', key);
        return w?.consumption.a === 12 && w.consumption.c === 2;
      },
      10_000,
      'b to converge',
    );
    // a and c stop gossiping: the jobs replayed below are then all that reaches b (a quiet donor's later return of
    // allowance, docs/federation.md §2, would otherwise change b's state while it is compared). Then settled: b has
    // merged what they sent and its own state stops changing before it is compared.
    const others = fed.regions.filter((region) => region !== b);
    await fed.flushAll();
    await Promise.all(others.map((region) => region.stopFederation()));
    let settled = '';
    let steady = 0;
    await eventually(
      async () => {
        await fed.flushAll();
        await new Promise((resolve) => setTimeout(resolve, 150));
        const now = JSON.stringify(await stateOf(b, 'fw', key));
        steady = now === settled ? steady + 1 : 0;
        settled = now;
        return steady >= 3;
      },
      10_000,
      "b's state to settle",
    );

    const inbound = new Queue(GOSSIP_QUEUE, { connection: { host: '127.0.0.1', port: b.server.port }, prefix: GOSSIP_QUEUE_PREFIX });
    try {
      const { encodeJob, readJob } = await import('../../src/federation/gossip/message.ts');
      const n = fed.regions.length;
      const done = await inbound.getJobs(['completed'], 0, 99);
      const carrying = done.filter((job) => {
        const message = readJob(job.data, n);
        return message.kind === 'gossip' && message.entries.some((entry) => entry.k.includes(':fw:'));
      });
      expect(carrying.length).toBeGreaterThan(0);
      const before = await stateOf(b, 'fw', key);

      // 1. The very same jobs again: recognised as replays, counted, nothing applied.
      const replayed = await Promise.all(carrying.map((job) => inbound.add('gossip', job.data)));
      await eventually(
        async () => (await Promise.all(replayed.map((job) => job.getState()))).every((state) => state === 'failed'),
        10_000,
        'replays to be rejected',
      );
      const metric = await b.registry.getSingleMetricAsString('quotafed_federation_rejected_jobs_total');
      expect(metric).toMatch(/reason="replayed"/);

      // 2. The same contents under fresh sequence numbers (valid signatures), shuffled and duplicated: applied,
      //    and the merge (a max) changes nothing.
      const copies = [...carrying, ...carrying].map((job) => readJob(job.data, n)).sort(() => Math.random() - 0.5);
      let next = 6e15;
      const resent = await Promise.all(copies.map((message) => inbound.add('gossip', encodeJob({ ...message, seq: next++ }, n, SECRET))));
      // Completed, or completed and already trimmed from the queue's short completed set (GOSSIP_KEEP_COMPLETED):
      // a failed job would be kept, and one still waiting or active is neither.
      await eventually(
        async () => (await Promise.all(resent.map((job) => job.getState()))).every((state) => state === 'completed' || state === 'unknown'),
        10_000,
        're-signed copies to apply',
      );
      expect(await stateOf(b, 'fw', key)).toEqual(before);
    } finally {
      await inbound.close();
      await Promise.all(others.map((region) => region.startFederation()));
    }
  });
});

describe('restart without loss', () => {
  it("a stopped region's federation catches up on what it missed and what it admitted meanwhile", async () => {
    const key = apiKey();
    const [a, b, c] = fed.regions as [TestRegion, TestRegion, TestRegion];
    await b.stopFederation();
    try {
      expect(await admit(a, key, 9)).toBe(9);
      expect(await admit(b, key, 4)).toBe(4);
      await a.federation!.flush();
      // a's jobs wait in b's queue; b's changes wait in b's pending sets.
      await eventually(async () => (await currentWindow(c, 'fw', key))?.consumption.a === 9, 10_000, 'c to see a');
      expect((await currentWindow(c, 'fw', key))?.consumption.b ?? 0).toBe(0);
    } finally {
      await b.startFederation();
    }
    expect(b.federation!.recovery?.fenced).toBe(false);
    for (const region of fed.regions) {
      await eventually(
        async () => {
          const w = await currentWindow(region, 'fw', key);
          return w?.consumption.a === 9 && w.consumption.b === 4;
        },
        15_000,
        `${region.name} to converge after b's restart`,
      );
    }
  });
});

describe('demand following', () => {
  it('a region with all the traffic ends the window with >= 95% of the limit; the others gave theirs away', async () => {
    const key = apiKey();
    const a = fed.region('a');
    // Long enough for the handful of gossip exchanges the transfers need, even on a loaded machine.
    const period = 10_000;
    // Start at the beginning of a window so the whole window is observed.
    const wait = period - (Date.now() % period);
    await new Promise((resolve) => setTimeout(resolve, wait + 20));
    const windowEnd = Math.floor(Date.now() / period) * period + period;
    let admitted = 0;
    for (let i = 0; i < 5_000 && Date.now() < windowEnd - 400; i++) {
      const decision = await a.engine.decide(request(key, '/demand'));
      if (decision.allowed && decision.binding?.resetAtMs === windowEnd) admitted++;
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    expect(admitted).toBeGreaterThanOrEqual(285);
    expect(admitted).toBeLessThanOrEqual(300);
    const id = windowEnd / period - 1;
    const w = (await view(a, 'demand', key)).windows.find((slot) => slot.id === id)!;
    expect(w.consumption).toEqual({ a: admitted, b: 0, c: 0 });
    const given = Object.fromEntries(w.transfers.filter((t) => t.to === 'a').map((t) => [t.from, t.amount]));
    expect(given.b).toBeGreaterThan(0);
    expect(given.c).toBeGreaterThan(0);
  }, 30_000);
});

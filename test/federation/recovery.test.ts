// Recovery with real processes: a peer's Redis killed and restarted with AOF (the backlog drains, nothing is
// fenced), a region's Redis wiped while it runs (FLUSHALL: it fences, denies in the current window and rebuilds
// its views from its peers), and a region restarted on an empty Redis (start-up recovery asks the peers).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federationKeyView } from '../../src/federation/admin-view.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';
import { KEY_SHARDS, shardMarkerKey } from '../../src/keys.ts';

const PERIOD = 20_000;
const SHORT = 4_000;
const LIMIT = 300;
const BUDGET = 15;
let fed: TestFederation;

beforeAll(async () => {
  fed = await startTestFederation({
    appendOnly: true,
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
      // A short window, so the start-up case does not wait for the end of the window the wipe case fenced.
      {
        name: 'short',
        match: { endpoints: ['/short'] },
        by: ['apiKey'],
        algorithm: 'fixedWindow',
        limit: LIMIT,
        period: SHORT,
        leakageBudget: BUDGET,
      },
    ],
  });
});
afterAll(() => fed?.close());

let seq = 0;
const apiKey = () => `rec-${++seq}-${Math.random().toString(36).slice(2)}`;
const request = (key: string, path = '/fw') => ({ apiKey: key, ip: '10.0.0.1', method: 'GET', path });
const windowOf = async (region: TestRegion, key: string, id: number, rule = 'fw') =>
  (await federationKeyView(region.config, region.redis, rule, { apiKey: key, endpoint: `/${rule}` })).windows.find((w) => w.id === id);

/** Admitted per window end (resetAtMs), so a window boundary during the test cannot blur the sums. */
async function admit(region: TestRegion, key: string, count: number, tally?: Map<number, number>, path = '/fw'): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < count; i++) {
    const decision = await region.engine.decide(request(key, path));
    if (decision.allowed) {
      allowed++;
      const end = decision.binding!.resetAtMs;
      tally?.set(end, (tally.get(end) ?? 0) + 1);
    }
  }
  return allowed;
}

/** Waits for a window with at least `needMs` left that starts after `after` (ms); returns its id. */
async function freshWindow(needMs: number, period = PERIOD, after = 0): Promise<number> {
  for (let i = 0; i < 10; i++) {
    const left = period - (Date.now() % period);
    if (left >= needMs && Math.floor(Date.now() / period) * period > after) break;
    await new Promise((resolve) => setTimeout(resolve, left + 20));
  }
  return Math.floor(Date.now() / period);
}

describe('recovery', () => {
  it('starts fresh: no region was fenced at first start', () => {
    for (const region of fed.regions) {
      expect(region.federation!.recovery).toMatchObject({ fenced: false, fence: 0 });
    }
  });

  it("a peer's Redis killed and restarted with AOF: the sender's backlog grows, then drains", async () => {
    const [a, , c] = fed.regions as [TestRegion, TestRegion, TestRegion];
    const id = await freshWindow(8_000);
    const key = apiKey();
    await c.server.kill('SIGKILL');
    try {
      expect(await admit(a, key, 12)).toBe(12);
      await a.federation!.flush();
      // The fast lane may hold the key in flight to c when the flush runs (the flush then leaves it to that lane),
      // and its send fails only at the add's deadline: wait for the failure to be reported.
      const status = await eventually(
        () => a.federation!.status().find((peer) => peer.name === 'c' && peer.linkUp === false),
        5_000,
        'the link to c to be reported down',
      );
      expect(status.linkUp).toBe(false);
      expect(status.backlog).toBeGreaterThan(0);
    } finally {
      await c.server.restart();
    }
    await eventually(async () => (await windowOf(c, key, id))?.consumption.a === 12, 15_000, 'c to receive the backlog');
    await eventually(
      async () => a.federation!.status().find((peer) => peer.name === 'c')!.backlog === 0 || undefined,
      10_000,
      'backlog to drain',
    );
    // AOF kept c's data: its markers are intact and it was never fenced.
    expect(await c.redis.hget(shardMarkerKey(0), 'fence')).toBe('0');
  });

  it('FLUSHALL under a running region: it fences, denies for the rest of the window, rebuilds its views via resync', async () => {
    const [a, b, c] = fed.regions as [TestRegion, TestRegion, TestRegion];
    const id = await freshWindow(12_000);
    const key = apiKey();
    const tally = new Map<number, number>();
    expect(await admit(b, key, 40, tally)).toBe(40);
    // a may already have seen b's demand and, idle itself, handed b all but one of its allowance (free donor).
    const fromA = await admit(a, key, 10, tally);
    expect(fromA).toBeGreaterThan(0);
    await eventually(
      async () => (await windowOf(a, key, id))?.consumption.b === 40 && (await windowOf(c, key, id))?.consumption.b === 40,
      10_000,
      'peers to see b',
    );

    await b.redis.flushall();
    // b now holds nothing about key: without the fence it would hand out its whole allowance again.
    await eventually(
      async () => (await b.redis.hget(shardMarkerKey(5), 'fence')) !== null && (await b.redis.hexists('qf:meta', 'started')) === 1,
      5_000,
      'b to detect the loss',
    );
    const fence = Number(await b.redis.hget(shardMarkerKey(5), 'fence'));
    expect(fence).toBeGreaterThan(id * PERIOD);

    const sameWindow = (end: number) => end === (id + 1) * PERIOD;
    const bAfter = new Map<number, number>();
    await admit(b, key, 60, bAfter);
    expect([...bAfter].filter(([end]) => sameWindow(end))).toEqual([]);

    // Peers resend everything: b learns its own 40 back, and what a admitted.
    const rebuilt = await eventually(
      async () => {
        const w = await windowOf(b, key, id);
        return w && w.consumption.b === 40 && w.consumption.a === fromA ? w : undefined;
      },
      15_000,
      'b to rebuild its views',
    );
    expect(rebuilt.fenced).toBe(true);

    // The others keep admitting within their allowances; the window's total stays within L + B.
    await admit(a, key, 200, tally);
    await admit(c, key, 200, tally);
    for (const [end, count] of bAfter) tally.set(end, (tally.get(end) ?? 0) + count);
    expect(tally.get((id + 1) * PERIOD)!).toBeLessThanOrEqual(LIMIT + BUDGET);
  }, 40_000);

  it('a region restarted on an empty Redis is fenced at start-up because its peers have heard of it', async () => {
    const [a, b] = fed.regions as [TestRegion, TestRegion, TestRegion];
    const key = apiKey();
    const id = await freshWindow(2_500, SHORT, Number(await b.redis.hget(shardMarkerKey(0), 'fence')));
    expect(await admit(b, key, 10, undefined, '/short')).toBe(10);
    await eventually(async () => (await windowOf(a, key, id, 'short'))?.consumption.b === 10, 10_000, 'a to see b');
    await b.stopFederation();
    await b.server.kill('SIGKILL');
    // Same port and directory, but the AOF is gone: the restart comes up empty.
    const { rmSync, readdirSync } = await import('node:fs');
    for (const entry of readdirSync(b.server.dir))
      if (entry.startsWith('appendonly')) rmSync(`${b.server.dir}/${entry}`, { recursive: true, force: true });
    await b.server.restart();
    await eventually(async () => (await b.redis.ping()) === 'PONG', 5_000, 'b redis');
    await b.startFederation();
    expect(b.federation!.recovery).toMatchObject({ fenced: true, answers: { a: 'heard', c: 'heard' } });
    const fences = await Promise.all(Array.from({ length: KEY_SHARDS }, (_, shard) => b.redis.hget(shardMarkerKey(shard), 'fence')));
    expect(fences.every((fence) => Number(fence) === b.federation!.recovery!.fence)).toBe(true);
    // The window holding the fence is forfeited (the check is skipped only if a new window began since).
    const after = await b.engine.decide(request(key, '/short'));
    if (after.binding!.resetAtMs - SHORT < b.federation!.recovery!.fence) expect(after.allowed).toBe(false);
    await eventually(async () => (await windowOf(b, key, id, 'short'))?.consumption.b === 10, 15_000, 'b to rebuild its own row');
  }, 40_000);
});

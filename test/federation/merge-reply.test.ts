// Which peers a merge's result goes to (src/protocol/merge-gossip.ts ownRowAhead and relayWorthy; Lua mirror
// apply_gossip.lua): a merge that gave nothing goes to the peers but its sender when it brought them more than the
// sender's own count and time, and to every peer when the sender's view of this region's own row is behind, as when
// this region admitted silently. Spec and Lua, on a real redis-server.
import { describe, expect, it } from 'vitest';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { emptySlotCells, flattenSlot } from '../../src/federation/gossip/cells.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { layoutOf, shardOfKey } from '../../src/keys.ts';
import { emptyEpochSlot, emptyWindowSlot, mergeMarks, ownRowAhead, relayWorthy, topologyOf } from '../../src/protocol/index.ts';
import { withScripts } from '../../src/store/commands.ts';
import { applyGossipCall, runApplyGossip } from '../../src/store/gossip-calls.ts';
import { client, useRedis } from '../harness/redis.ts';
import { middleRegion } from '../support/middle-region.ts';
import { stateFields } from '../support/state-key.ts';

const MINUTE = 60_000;
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % MINUTE) + 10_000;

describe('ownRowAhead (spec)', () => {
  const slot = (
    id: number,
    c: number[],
    t: number[],
    x: number[][] = [
      [0, 0, 0],
      [0, 0, 0],
      [0, 0, 0],
    ],
  ) => ({
    ...emptyWindowSlot(3, id),
    c,
    t,
    x,
  });

  it('is true when this region counted, admitted later or gave more than the sender saw, in a window the sender sent', () => {
    const mine = [slot(42, [9, 5, 0], [100, 200, 0])];
    expect(ownRowAhead([slot(42, [9, 3, 0], [100, 150, 0])], mine, 1)).toBe(true);
    expect(ownRowAhead([slot(42, [9, 5, 0], [100, 150, 0])], mine, 1)).toBe(true);
    expect(
      ownRowAhead(
        [slot(42, [9, 5, 0], [100, 200, 0])],
        [
          slot(
            42,
            [9, 5, 0],
            [100, 200, 0],
            [
              [0, 0, 0],
              [4, 0, 0],
              [0, 0, 0],
            ],
          ),
        ],
        1,
      ),
    ).toBe(true);
  });

  it("is false when the sender's view of this region's row is current, or the window is not one the sender sent", () => {
    const mine = [slot(42, [9, 5, 0], [100, 200, 0])];
    expect(ownRowAhead([slot(42, [12, 5, 0], [300, 200, 0])], mine, 1)).toBe(false);
    expect(ownRowAhead([slot(41, [9, 0, 0], [100, 0, 0])], mine, 1)).toBe(false);
  });
});

describe('mergeMarks (spec)', () => {
  it('sends a grant to every peer, a merge the sender was behind on back to it, and news on to the others', () => {
    expect(mergeMarks(true, false, false)).toEqual({ sender: true, others: true });
    expect(mergeMarks(false, true, false)).toEqual({ sender: true, others: false });
    expect(mergeMarks(false, false, true)).toEqual({ sender: false, others: true });
    expect(mergeMarks(false, true, true)).toEqual({ sender: true, others: true });
    expect(mergeMarks(false, false, false)).toEqual({ sender: false, others: false });
  });
});

describe('relayWorthy (spec)', () => {
  const held = [{ ...emptyWindowSlot(3, 42), c: [7, 0, 1], t: [100, 0, 50] }];
  const sent = (change: (slot: ReturnType<typeof emptyWindowSlot>) => void) => {
    const slot = { ...emptyWindowSlot(3, 42), c: [9, 0, 1], t: [120, 0, 50] };
    slot.x = slot.x.map((row) => [...row]);
    slot.a = slot.a.map((row) => [...row]);
    change(slot);
    return [slot];
  };

  it("is false when the entry brings only the sender's own count and time", () => {
    expect(
      relayWorthy(
        held,
        sent(() => undefined),
        0,
      ),
    ).toBe(false);
    // Nothing held yet: still only the sender's own row.
    expect(relayWorthy([], [{ ...emptyWindowSlot(3, 42), c: [9, 0, 0], t: [120, 0, 0] }], 0)).toBe(false);
  });

  it("is true for a third region's count or time, a transfer, an acknowledgement or a token bucket's tokens moved", () => {
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.c[2] = 2)),
        0,
      ),
    ).toBe(true);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.t[1] = 10)),
        0,
      ),
    ).toBe(true);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.x[0]![2] = 3)),
        0,
      ),
    ).toBe(true);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.a[0]![2] = 1)),
        0,
      ),
    ).toBe(true);
    // A token bucket's tokens moved by a third region (region 1 to region 2).
    const epoch = {
      ...emptyEpochSlot(3, 42),
      y: [
        [0, 0, 0],
        [0, 0, 0.5],
        [0, 0, 0],
      ],
    };
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 0)).toBe(true);
  });

  it("is false for a token bucket's sender's own transfer and tokens, which it sends every peer itself; a window's stays relayed", () => {
    // Region 0 granted region 1 (x and the tokens moved with it) and region 2 (x alone): news to region 2 only from
    // region 0's own row.
    const epoch = {
      ...emptyEpochSlot(3, 42),
      c: [9, 0, 0],
      t: [120, 0, 0],
      x: [
        [0, 300, 200],
        [0, 0, 0],
        [0, 0, 0],
      ],
      y: [
        [0, 0.5, 0],
        [0, 0, 0],
        [0, 0, 0],
      ],
    };
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 0)).toBe(false);
    // The same transfer seen from region 2's side (a third region's row) is news.
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 2)).toBe(true);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.x[0]![2] = 3)),
        0,
      ),
    ).toBe(true);
  });

  it('is false for a window the merge does not take (an older one where a newer is held)', () => {
    expect(relayWorthy([{ ...emptyWindowSlot(3, 45), c: [1, 0, 0] }], [{ ...emptyWindowSlot(3, 42), c: [0, 0, 9] }], 0)).toBe(false);
    // A newer window than the one held counts from zeros.
    expect(relayWorthy([{ ...emptyWindowSlot(3, 39), c: [0, 0, 9] }], [{ ...emptyWindowSlot(3, 42), c: [0, 0, 1] }], 0)).toBe(true);
  });
});

describe('apply_gossip.lua: who a merge that gave nothing goes to', async () => {
  const server = await useRedis();
  const redis = withScripts(client(server.url));
  const rule = { name: 'fw', by: ['apiKey' as const], algorithm: 'fixedWindow' as const, limit: 300, period: MINUTE };
  const config = middleRegion([rule]);
  const topology = topologyOf(config);
  const layout = layoutOf(config);
  const self = topology.selfIndex;
  const [sender, third] = topology.peerIndexes as [number, number];
  const n = topology.regions.length;
  const id = Math.floor(T0 / MINUTE);
  let caller = 0;

  /**
   * A key this region admitted `admitted` times silently at T0, then a peer's gossip seeing `seen` of them (and, with
   * `thirdCount`, that many admissions of the third region).
   */
  async function mergeSeeing(admitted: number, seen: number, thirdCount = 0): Promise<{ sender: boolean; third: boolean }> {
    await markShardsIntact(redis);
    const engine = createRedisEngine({ config, redis, overLimitCache: false, nowMs: () => T0 });
    const apiKey = `merge-reply-${++caller}`;
    for (let i = 0; i < admitted; i++) expect((await engine.decide({ apiKey, ip: '', method: 'GET', path: '/' })).allowed).toBe(true);
    await engine.close();
    const key = layout.ruleKey('fw', { principal: apiKey, dimensions: [apiKey] });
    // Silent: nothing pending for anyone yet.
    const shard = shardOfKey(key);
    expect(await redis.zscore(layout.peerPendingKey(shard, sender), key)).toBeNull();
    const own = await stateFields(redis, key);
    // The sender's slot: its own 7, and `seen` of this region's (with its time when it saw them all).
    const slot = emptySlotCells(id, n);
    slot.c[sender] = 7;
    slot.t[sender] = T0;
    slot.c[self] = seen;
    slot.t[self] = seen === admitted ? Number(own[`t${id % 3}.${self}`]) : 0;
    slot.c[third] = thirdCount;
    slot.t[third] = thirdCount > 0 ? T0 : 0;
    const call = applyGossipCall(topology, config.rules[0]!, 0, sender, { k: key, t: T0, s: [flattenSlot(slot)] }, { now: T0 });
    const reply = await runApplyGossip(redis, call);
    expect(reply.changed).toBe(true);
    expect(reply.granted).toBe(false);
    return {
      sender: (await redis.zscore(layout.peerPendingKey(shard, sender), key)) !== null,
      third: (await redis.zscore(layout.peerPendingKey(shard, third), key)) !== null,
    };
  }

  it("goes back to the sender, and only to it, when it had not seen this region's silent admissions", async () => {
    expect(await mergeSeeing(3, 0)).toEqual({ sender: true, third: false });
  });

  it('goes to both when the sender had not seen them and brought the third region news', async () => {
    expect(await mergeSeeing(3, 0, 2)).toEqual({ sender: true, third: true });
  });

  it("is not echoed to a sender that has seen them all, nor relayed when it brought only the sender's own count", async () => {
    expect(await mergeSeeing(3, 3)).toEqual({ sender: false, third: false });
  });

  it("is relayed to the third region when it brought that region's count too", async () => {
    expect(await mergeSeeing(3, 3, 2)).toEqual({ sender: false, third: true });
  });
});

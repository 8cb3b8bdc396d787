// Which peers a merge's result goes to (src/protocol/merge-gossip.ts ownRowAhead and relayWorthy; Lua mirror
// apply_gossip.lua): a merge that gave nothing goes to the peers but its sender when it brought them more than the
// sender's own count and time, and to every peer when the sender's view of this region's own row is behind, as when
// this region admitted silently. Spec and Lua, on a real redis-server.
import { describe, expect, it } from 'vitest';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { emptySlotCells, flattenSlot } from '../../src/federation/gossip/cells.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { layoutOf, shardOfKey } from '../../src/keys.ts';
import {
  admitsIn,
  emptyEpochSlot,
  emptyWindowSlot,
  granteesOf,
  marksPeer,
  mergeMarks,
  ownRowAhead,
  relayTargets,
  relayWorthy,
  topologyOf,
} from '../../src/protocol/index.ts';
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
  it("sends an idle donor's grant to its grantee alone, an active region's to every peer, a merge the sender was behind on back to it, and news on to the peers it is news to", () => {
    expect(mergeMarks([0], false, [], false)).toEqual({ sender: false, others: false, relayTo: [], grantees: [0] });
    expect(mergeMarks([0], false, [], true)).toEqual({ sender: true, others: true, relayTo: [], grantees: [0] });
    expect(mergeMarks([], true, [], true)).toEqual({ sender: true, others: false, relayTo: [], grantees: [] });
    expect(mergeMarks([], false, [2], false)).toEqual({ sender: false, others: false, relayTo: [2], grantees: [] });
    expect(mergeMarks([], false, [], true)).toEqual({ sender: false, others: false, relayTo: [], grantees: [] });
    // Region 1 (idle) granted region 0 in a merge of region 2's message: only region 0 hears of it.
    const grant = mergeMarks([0], false, [], false);
    expect([0, 2].map((peer) => marksPeer(grant, peer, 2))).toEqual([true, false]);
    // A relay to region 3 of four, from region 0's message: region 3 alone.
    const relay = mergeMarks([], false, [3], false);
    expect([0, 2, 3].map((peer) => marksPeer(relay, peer, 0))).toEqual([false, false, true]);
  });
});

describe('granteesOf and admitsIn (spec)', () => {
  it('names the peers whose transfer from this region grew, and whether it admitted in a kept slot', () => {
    const before = [{ ...emptyEpochSlot(3, 42) }];
    const after = [
      {
        ...emptyEpochSlot(3, 42),
        x: [
          [0, 0, 0],
          [333_333, 0, 5],
          [0, 0, 0],
        ],
      },
    ];
    expect(granteesOf(before, after, 1)).toEqual([0, 2]);
    expect(granteesOf(after, after, 1)).toEqual([]);
    expect(granteesOf([], after, 1)).toEqual([0, 2]);
    expect(admitsIn(after, 1)).toBe(false);
    expect(admitsIn([{ ...emptyEpochSlot(3, 42), c: [0, 3, 0] }], 1)).toBe(true);
  });
});

describe('relayWorthy and relayTargets (spec)', () => {
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
        2,
      ),
    ).toBe(false);
    // Nothing held yet: still only the sender's own row.
    expect(relayWorthy([], [{ ...emptyWindowSlot(3, 42), c: [9, 0, 0], t: [120, 0, 0] }], 0, 2)).toBe(false);
  });

  it("is true for a third region's count or time, a transfer, an acknowledgement or a token bucket's tokens moved; never for the target's own row", () => {
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.c[2] = 2)),
        0,
        1,
      ),
    ).toBe(true);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.c[2] = 2)),
        0,
        2,
      ),
    ).toBe(false);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.t[1] = 10)),
        0,
        2,
      ),
    ).toBe(true);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.t[1] = 10)),
        0,
        1,
      ),
    ).toBe(false);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.x[0]![2] = 3)),
        0,
        2,
      ),
    ).toBe(true);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.a[0]![2] = 1)),
        0,
        2,
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
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 0, 2)).toBe(true);
    // Region 1's own tokens moved, back to region 1: no news (it wrote them).
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 0, 1)).toBe(false);
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
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 0, 2)).toBe(false);
    // The same transfer sent by region 2 (region 0's row a third region's) is news to region 1, not to region 0.
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 2, 1)).toBe(true);
    expect(relayWorthy([emptyEpochSlot(3, 42)], [epoch], 2, 0)).toBe(false);
    expect(
      relayWorthy(
        held,
        sent((slot) => (slot.x[0]![2] = 3)),
        0,
        2,
      ),
    ).toBe(true);
  });

  it('is false for a window the merge does not take (an older one where a newer is held)', () => {
    expect(relayWorthy([{ ...emptyWindowSlot(3, 45), c: [1, 0, 0] }], [{ ...emptyWindowSlot(3, 42), c: [0, 0, 9] }], 0, 1)).toBe(false);
    // A newer window than the one held counts from zeros.
    expect(relayWorthy([{ ...emptyWindowSlot(3, 39), c: [0, 0, 9] }], [{ ...emptyWindowSlot(3, 42), c: [0, 0, 1] }], 0, 1)).toBe(true);
  });

  it('relays to the peers but the sender and this region that the merge is news to', () => {
    type Case = [why: string, change: (slot: ReturnType<typeof emptyWindowSlot>) => void, self: number, idle: boolean, to: number[]];
    const cases: Case[] = [
      ["idle region 1, region 2's count: news to nobody of three (region 2 wrote it)", (slot) => (slot.c[2] = 2), 1, true, []],
      ["region 1 admitting in the key relays it (the relay carries region 0's latest count too)", (slot) => (slot.c[2] = 2), 1, false, [2]],
      ["idle region 2, region 1's time: no news to region 1 either", (slot) => (slot.t[1] = 10), 2, true, []],
      ["idle region 1, region 0's window transfer to region 2: news to region 2", (slot) => (slot.x[0]![2] = 3), 1, true, [2]],
    ];
    for (const [why, change, self, idle, to] of cases) expect(relayTargets(held, sent(change), 0, self, idle), why).toEqual(to);
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
   * `thirdCount`, that many admissions of the third region; with `transferToThird`, the sender's transfer to it).
   */
  async function mergeSeeing(
    admitted: number,
    seen: number,
    { thirdCount = 0, transferToThird = 0 }: { thirdCount?: number; transferToThird?: number } = {},
  ): Promise<{ sender: boolean; third: boolean }> {
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
    slot.x[sender * n + third] = transferToThird;
    const call = applyGossipCall(
      layoutOf(config),
      topology,
      config.rules[0]!,
      0,
      sender,
      { k: key, t: T0, s: [flattenSlot(slot)] },
      { now: T0 },
    );
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
    expect(await mergeSeeing(3, 0, { transferToThird: 2 })).toEqual({ sender: true, third: true });
  });

  it("is not echoed to a sender that has seen them all, nor relayed when it brought only the sender's own count", async () => {
    expect(await mergeSeeing(3, 3)).toEqual({ sender: false, third: false });
  });

  it("is relayed to the third region when it brought news of a window's transfer to it", async () => {
    expect(await mergeSeeing(3, 3, { transferToThird: 2 })).toEqual({ sender: false, third: true });
  });

  it("is relayed to the third region when it brought that region's count too, by a region that admits in the key", async () => {
    expect(await mergeSeeing(3, 3, { thirdCount: 2 })).toEqual({ sender: false, third: true });
  });

  it('is not relayed to the third region by an idle region when all it brought of it was its own count (it wrote it)', async () => {
    await markShardsIntact(redis);
    const key = layout.ruleKey('fw', { principal: 'merge-idle', dimensions: ['merge-idle'] });
    const shard = shardOfKey(key);
    const pendingFor = async (peer: number) => (await redis.zscore(layout.peerPendingKey(shard, peer), key)) !== null;
    const slot = emptySlotCells(id, n);
    slot.c[sender] = 7;
    slot.t[sender] = T0;
    slot.c[third] = 2;
    slot.t[third] = T0;
    const merge = (at: number) =>
      runApplyGossip(
        redis,
        applyGossipCall(layoutOf(config), topology, config.rules[0]!, 0, sender, { k: key, t: at, s: [flattenSlot(slot)] }, { now: at }),
      );
    // The first merge: this idle region gives both active peers part of its allowance (each hears of its grant).
    expect(await merge(T0)).toMatchObject({ changed: true, granted: true });
    expect([await pendingFor(sender), await pendingFor(third)]).toEqual([true, true]);
    await redis.zrem(layout.peerPendingKey(shard, sender), key);
    await redis.zrem(layout.peerPendingKey(shard, third), key);
    // Then the sender, having merged those grants, sees the third region's count grow: news to nobody (the third
    // region wrote it), and nothing the sender has not seen of this region's own row.
    const held = await redis.hgetall(key);
    for (const d of [sender, third]) slot.x[self * n + d] = Number(held[`x${id % 3}.${self}.${d}`]);
    slot.c[third] = 3;
    expect(await merge(T0 + 1)).toMatchObject({ changed: true, granted: false });
    expect([await pendingFor(sender), await pendingFor(third)]).toEqual([false, false]);
    // A window's transfer from the sender to the third region is news to it, relayed by the idle region too.
    slot.x[sender * n + third] = 3;
    expect(await merge(T0 + 2)).toMatchObject({ changed: true, granted: false });
    expect([await pendingFor(sender), await pendingFor(third)]).toEqual([false, true]);
  });
});

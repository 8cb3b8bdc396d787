// The typed script calls (src/store/*-calls.ts) against a real redis-server: a refund built by refundCall
// undoes exactly what a decide built by decideCall committed, and a reply of another shape is an error naming the
// script, never a misread number.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { Algorithm } from '../../src/config/schema.ts';
import { withScripts } from '../../src/store/commands.ts';
import { decideCall, decideRuleArgs, parseDecideReply } from '../../src/store/decide-calls.ts';
import {
  drainBellsCall,
  parseApplyGossipReply,
  parseDrainBellsReply,
  runDrainBells,
  parseScreenGossipReply,
  parseTakeFastReply,
  parseTakePendingReply,
  runTakeFast,
  takeFastCall,
} from '../../src/store/gossip-calls.ts';
import { runScript } from '../../src/store/script-call.ts';
import { refundCall, runRefund } from '../../src/store/settle-calls.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { keyLayout, refundMarkerKey, ruleKey, shardMarkerKey, shardOf } from '../../src/keys.ts';
import { client, useRedis } from '../harness/redis.ts';
import { stateFields } from '../support/state-key.ts';

const server = await useRedis();
const redis = withScripts(client(server.url));

describe('refundCall undoes decideCall', () => {
  const cases: [string, Algorithm][] = [
    ['fw', 'fixedWindow'],
    ['sw', 'slidingWindow'],
    ['tb', 'tokenBucket'],
  ];
  for (const [name, algorithm] of cases) {
    it(`${algorithm}: the refunded state is the state before the decide`, async () => {
      const config = parseConfig({ region: 'solo', rules: [{ name, by: ['apiKey'], algorithm, limit: 10, period: '1m' }] });
      const rule = config.rules[0]!;
      const topology = topologyOf(config);
      const principal = `refund-${name}`;
      const key = ruleKey(name, { principal, dimensions: [principal] });
      const now = 1_800_000_000_000 + 12_345;
      const decide = (cost: number) =>
        decideCall({
          fixedKeys: [shardMarkerKey(shardOf(principal))],
          ruleKeys: [key],
          rules: [decideRuleArgs(rule, config.federation.leakageBudget, 1)],
          topology,
          regions: 1,
          cost,
          leaseId: '',
          now,
        });
      const first = parseDecideReply(await redis.decide(...(decide(1) as [number, ...(string | number)[]])), 1);
      expect(first.allAllowed).toBe(true);
      const before = await stateFields(redis, key);
      const second = parseDecideReply(await redis.decide(...(decide(3) as [number, ...(string | number)[]])), 1);
      expect(second.rules[0]!.allowed).toBe(true);
      expect(await stateFields(redis, key)).not.toEqual(before);
      const refund = refundCall(
        topology.selfIndex,
        second.now,
        [{ key, algorithm, period: rule.period, limit: rule.limit }],
        3,
        '',
        refundMarkerKey(shardOf(principal), `r-${name}`),
      );
      expect(await runRefund(redis, refund)).toBe(1);
      // Same clock, so a token bucket's refill is zero: its one number comes back to the very same value.
      expect(await stateFields(redis, key)).toEqual(before);
      // The same refund delivered again (ioredis resends an unanswered command after a reconnect) returns nothing.
      expect(await runRefund(redis, refund)).toBe(0);
      expect(await stateFields(redis, key)).toEqual(before);
    });
  }
});

describe('reply parsers', () => {
  it('read the shapes the scripts answer', async () => {
    expect(parseDecideReply([1, 5, 1, 9, 60_000, 0, 0, 997, 4], 1)).toEqual({
      allAllowed: true,
      now: 5,
      rules: [{ allowed: true, remaining: 9, resetAtMs: 60_000, retryAfterMs: 0, falseDenial: false, quotaRemaining: 997, leased: 4 }],
    });
    expect(parseDecideReply([0, 5, 0, 0, 60_000, 40, 1, 12, 0], 1).rules[0]!.falseDenial).toBe(true);
    expect(parseApplyGossipReply([0, -3, 1, 5])).toEqual({ changed: false, lagMs: -3, granted: true, lanes: 5 });
    expect(parseTakePendingReply([3, [['k', '7', ['f', 'v']]]])).toEqual({
      pending: 3,
      keys: [{ key: 'k', version: '7', fields: ['f', 'v'] }],
    });
    expect(parseScreenGossipReply([1, '12', 70_000])).toEqual({ takeable: true, refused: [{ id: '12', bytes: 70_000 }] });
    expect(parseScreenGossipReply([0])).toEqual({ takeable: false, refused: [] });
    // And real replies: take_pending on an empty set, and on one of three keys taking two (the oldest, by version).
    expect(parseTakePendingReply(await runScript(redis, 'takePending', { keys: ['qf:{s0}:p:1'], args: [10] }))).toEqual({
      pending: 0,
      keys: [],
    });
    await redis.zadd('qf:{s0}:p:2', 3, 'qf:{s0}:c', 1, 'qf:{s0}:a', 2, 'qf:{s0}:b');
    await redis.hset('qf:{s0}:a', 'v', '1');
    const taken = parseTakePendingReply(await runScript(redis, 'takePending', { keys: ['qf:{s0}:p:2'], args: [2] }));
    expect(taken).toEqual({
      pending: 3,
      keys: [
        { key: 'qf:{s0}:a', version: '1', fields: ['v', '1'] },
        { key: 'qf:{s0}:b', version: '2', fields: [] },
      ],
    });
  });

  it('throw an error naming the script on a reply of another shape', () => {
    expect(() => parseDecideReply([1, 5, 1], 1)).toThrow(/lua\/decide\.lua answered an unexpected reply/);
    expect(() => parseDecideReply([1, 5, 1, 9, 0, 0], 1)).toThrow(/lua\/decide\.lua answered an unexpected reply/);
    expect(() => parseDecideReply([1, 5, 1, 9, 0, 0, 0, 9], 1)).toThrow(/lua\/decide\.lua answered an unexpected reply/);
    expect(() => parseDecideReply([1, 5, 'x', 9, 0, 0, 0, 9, 0], 1)).toThrow(/decide\.lua.*a number/);
    expect(() => parseApplyGossipReply('OK')).toThrow(/apply_gossip\.lua/);
    expect(() => parseTakePendingReply([['k', '7']])).toThrow(/take_pending\.lua/);
    expect(() => parseTakePendingReply([1, [['k', '7']]])).toThrow(/take_pending\.lua/);
    expect(() => parseTakeFastReply([['k']])).toThrow(/take_fast\.lua/);
    expect(() => parseScreenGossipReply([1, '12'])).toThrow(/screen_gossip\.lua/);
  });
});

describe('take_fast.lua', () => {
  it("pops a shard's fast-lane keys with their state in one call; an expired key or a string comes back without fields", async () => {
    const layout = keyLayout();
    const shard = 7;
    const set = layout.fastSetKey(shard);
    const loud = `qf:{s${shard}}:fast-test:loud`;
    const silent = `qf:{s${shard}}:fast-test:silent`;
    const gone = `qf:{s${shard}}:fast-test:gone`;
    await redis.del(set, loud, silent, gone);
    await redis.hset(loud, 'v', '3', 't', '1800000000000');
    await redis.set(silent, 'S0|1|2|3||||||||||');
    await redis.sadd(set, loud, silent, gone);
    const first = await runTakeFast(redis, takeFastCall(layout, shard, 2));
    const second = await runTakeFast(redis, takeFastCall(layout, shard, 2));
    const taken = [...first, ...second].sort((a, b) => a.key.localeCompare(b.key));
    expect(first).toHaveLength(2);
    expect(second).toHaveLength(1);
    expect(taken).toEqual([
      { key: gone, fields: [] },
      { key: loud, fields: ['v', '3', 't', '1800000000000'] },
      { key: silent, fields: [] },
    ]);
    expect(await redis.scard(set)).toBe(0);
    expect(await runTakeFast(redis, takeFastCall(layout, shard, 64))).toEqual([]);
  });
});

describe('drain_bells.lua', () => {
  it('pops every rung bell in one call, each with its elements, and leaves none behind', async () => {
    const layout = keyLayout();
    const bells = Array.from({ length: 64 }, (_, shard) => layout.bellKey(shard));
    await redis.del(...bells);
    await redis.rpush(layout.bellKey(3), 'L21');
    await redis.rpush(layout.bellKey(40), '1');
    expect(await runDrainBells(redis, drainBellsCall(bells))).toEqual([
      { bell: layout.bellKey(3), elements: ['L21'] },
      { bell: layout.bellKey(40), elements: ['1'] },
    ]);
    expect(await redis.exists(...bells)).toBe(0);
    expect(await runDrainBells(redis, drainBellsCall(bells))).toEqual([]);
    expect(() => parseDrainBellsReply([[3]])).toThrow(/drain_bells\.lua/);
  });
});

// The edges of the differential proof: what the Lua stores is what gossip carries (t cells and diagonal a cells
// included, checked strictly on receipt), and the publisher's sweep drives sweep_watch.lua over the watch sets
// with Redis TIME, dropping keys that no longer show a hungry peer or belong to no federated rule.
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { withScripts } from '../../src/store/commands.ts';
import { applyGossipCall, runApplyGossip } from '../../src/store/gossip-calls.ts';
import { decodeState, flattenSlot, slotLength, timeCellsOffset, unflattenSlot } from '../../src/federation/gossip/cells.ts';
import { encodeJob, LIMITS, MESSAGE_VERSION, verify, type GossipMessage } from '../../src/federation/gossip/message.ts';
import { sweepWatched } from '../../src/federation/gossip/watch-sweep.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { bellKey, fastSetKey, layoutOf, ruleKey, shardMarkerKey, shardOfKey, watchSetKey } from '../../src/keys.ts';
import { useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = withScripts(new Redis(server.url, { maxRetriesPerRequest: 1 }));
afterAll(() => redis.quit().catch(() => redis.disconnect()));

const config = parseConfig({
  region: 'b',
  federation: { leakageBudget: 0, peers: [{ name: 'a', redisUrl: 'redis://127.0.0.1:1' }] },
  rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1h' }],
});
const topology = topologyOf(config);
const rule = config.rules[0]!;
const n = 2;

describe('cells on the wire', () => {
  it('round-trips t cells and diagonal a cells, and decodes them from the hash the Lua writes', () => {
    const state = decodeState({ w0: '9', 'c0.1': '3', 'a0.1.1': '3', 'x0.0.1': '2', 't0.1': '1800000000123', t: '5', v: '2' }, n);
    const slot = state.slots[0]!;
    expect(slot).toEqual({ id: 9, c: [0, 3], x: [0, 2, 0, 0], a: [0, 0, 0, 3], t: [0, 1_800_000_000_123] });
    expect(flattenSlot(slot)).toHaveLength(slotLength(n));
    expect(unflattenSlot(flattenSlot(slot), n)).toEqual(slot);
    expect(state.changedAt).toBe(5);
  });

  it('accepts ms timestamps in t cells (above the count bound) and rejects anything else there', () => {
    const message = (t: number): GossipMessage => {
      const slot = new Array<number>(slotLength(n)).fill(0);
      slot[0] = 500_000;
      slot[1] = 4;
      slot[timeCellsOffset(n)] = t;
      return {
        v: MESSAGE_VERSION,
        kind: 'gossip',
        from: 'a',
        to: 'b',
        fp: topology.fingerprint,
        seq: 1,
        sentAt: 1,
        entries: [{ k: ruleKey('fw', { principal: 'x', dimensions: ['x'] }), t: 1, s: [slot] }],
      };
    };
    const job = (t: number) => encodeJob(message(t), n, undefined);
    expect(LIMITS.maxCount).toBeLessThan(1_800_000_000_000);
    const verdict = verify(job(1_800_000_000_000), 100, topology, 'b', undefined);
    expect(verdict.ok).toBe(true);
    // The wire carries the t cell as a delta against the entry's change time, and gives it back exactly.
    if (verdict.ok) expect(verdict.message.entries[0]!.s[0]![timeCellsOffset(n)]).toBe(1_800_000_000_000);
    for (const bad of [-1, 1.5, LIMITS.maxTime + 1]) {
      expect(verify(job(bad), 100, topology, 'b', undefined)).toMatchObject({ ok: false, reason: 'out_of_range' });
    }
  });
});

describe('the publisher sweep over the watch sets', () => {
  it('rebalances a watched key with a hungry peer, then lets it go; drops keys of unknown rules', async () => {
    const key = ruleKey('fw', { principal: 'hungry', dimensions: ['hungry'] });
    const shard = shardOfKey(key);
    await redis.hset(shardMarkerKey(shard), 'fence', 0);
    const [seconds] = await redis.time();
    const now = Number(seconds) * 1000;
    const id = Math.floor(now / rule.period);
    // a (index 0) admitted 40 of its 50 just now: hungry. b, active itself (5 admitted, so not a free donor),
    // keeps what it used as a reserve and gives half the rest (50 − 5 − 5 = 40 → 20) on merge, and watches the key.
    // Both last admitted a few seconds "ahead" (a peer's clock within the skew): the scripts read Redis TIME,
    // and a stall of the loaded machine of over a second would otherwise make b quiet (a free donor giving 44).
    const last = Math.min(now + 4_000, (id + 1) * rule.period - 1);
    const slot = { id, c: [40, 5], x: [0, 0, 0, 0], a: [40, 0, 0, 0], t: [last, last] };
    const call = applyGossipCall(layoutOf(config), topology, rule, config.federation.leakageBudget, 0, {
      k: key,
      t: last,
      s: [flattenSlot(slot)],
    });
    // Changed, the lag, and granted: the grant puts the key on the fast lane.
    const reply = await runApplyGossip(redis, call);
    expect(reply).toEqual({ changed: true, lagMs: expect.any(Number), granted: true, lanes: expect.any(Number) });
    // The bell it rang names the lanes it answers: the fast lane (the grant), the watch sweep, the round to a.
    expect(await redis.lrange(bellKey(shard), 0, -1)).toEqual([`L${reply.lanes}`]);
    expect(reply.lanes).toBe(1 | 2 | 4);
    expect(await redis.sismember(fastSetKey(shard), key)).toBe(1);
    const k = id % 3;
    expect(await redis.hget(key, `x${k}.1.0`)).toBe('20');
    expect(await redis.sismember(watchSetKey(shard), key)).toBe(1);
    const stale = 'qf:{s3}:gone:AAAAAAAAAAAAAAAA';
    await redis.sadd(watchSetKey(3), stale);

    // Still hungry (40 > 0.5·70): the sweep gives half of the remaining surplus (20 → 10) and marks it pending.
    expect(await sweepWatched(redis, config, topology)).toBe(1);
    expect(await redis.hget(key, `x${k}.1.0`)).toBe('30');
    expect(await redis.zscore(`qf:{s${shard}}:p:0`, key)).not.toBeNull();
    expect(await redis.sismember(watchSetKey(3), stale)).toBe(0);

    // 40 ≤ 0.5·80: nobody is hungry any more, so the next sweep drops the key without touching it.
    expect(await sweepWatched(redis, config, topology)).toBe(0);
    expect(await redis.sismember(watchSetKey(shard), key)).toBe(0);
    expect(await redis.hget(key, `x${k}.1.0`)).toBe('30');
  });
});

describe('federated token-bucket keys', () => {
  it('live at least 2P + skew + C·P/L (an expired bucket is then as full as the kept one would be)', async () => {
    const bucketConfig = parseConfig({
      region: 'b',
      federation: { maxClockSkewMs: 200, peers: [{ name: 'a', redisUrl: 'redis://127.0.0.1:1' }] },
      rules: [{ name: 'tb', by: ['apiKey'], algorithm: 'tokenBucket', limit: 10, period: 1_000, burst: 30, leakageBudget: 5 }],
    });
    const engine = createRedisEngine({ config: bucketConfig, redis, overLimitCache: false });
    const key = ruleKey('tb', { principal: 'ttl', dimensions: ['ttl'] });
    // A fresh region (recovery found no loss): without the marker the bucket would start empty at the fence.
    await redis.hset(shardMarkerKey(shardOfKey(key)), 'fence', 0);
    expect((await engine.decide({ apiKey: 'ttl', ip: '10.0.0.1', method: 'GET', path: '/', cost: 1 })).allowed).toBe(true);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThanOrEqual(2 * 1_000 + 200 + (30 * 1_000) / 10);
    // 3P + skew + (C + B)·P/L + 1 s: the σ path settles within 3P + skew of the last write, then refills to full.
    expect(ttl).toBeLessThanOrEqual(3 * 1_000 + 200 + ((30 + 5) * 1_000) / 10 + 1_000);
  });
});

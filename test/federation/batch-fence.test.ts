// A federated decide batch reads its recovery marker once (lua/includes/federation.lua shard_fence, its memo kept by
// decide_batch.lua for one FCALL; one marker for every shard of a redis-server, keys.ts): against a real redis-server, the calls of one batch answer what the same
// calls answer one by one (a missing marker is written once, at the batch's first call), and a fence set between two
// batches (src/federation/recovery.ts fences every shard so) is what the next batch decides by.
import { describe, expect, it } from 'vitest';
import { keyLayout, layoutOf, shardOf } from '../../src/keys.ts';
import { decideBatchArgs, unpackBatchReply } from '../../src/store/decide-calls.ts';
import { decideLibrary } from '../../src/store/library.ts';
import { client, useRedis } from '../harness/redis.ts';
import { federatedDecideCall } from '../support/decide-call.ts';

const server = await useRedis();
const redis = client(server.url);
const layout = keyLayout();
const library = decideLibrary('decide');
/** The per-key token bucket of regions/*.yaml, as the engine sends it to one of three regions. */
const RULE = { name: 'per-key', head: ['tb', 1000, 60_000, 1000] as const, budget: 50 };
const T0 = 1_800_000_000_000;

function callFor(key: string, now: number): (string | number)[] {
  return federatedDecideCall(key, RULE, now);
}

/** Four keys of one shard (one marker). */
function sameShardKeys(): string[] {
  const keys = ['k-0'];
  for (let i = 1; keys.length < 4; i++) if (shardOf(`k-${i}`) === shardOf(keys[0]!)) keys.push(`k-${i}`);
  return keys;
}

async function batch(calls: (string | number)[][]): Promise<unknown[]> {
  return unpackBatchReply(await redis.call('FCALL', library.batchFn, ...decideBatchArgs(calls)), calls.length);
}

async function oneByOne(calls: (string | number)[][]): Promise<unknown[]> {
  const replies: unknown[] = [];
  for (const call of calls) replies.push(await redis.call('FCALL', library.fn, ...call));
  return replies;
}

async function markerState(key: string): Promise<Record<string, string>> {
  return redis.hgetall(layout.shardMarkerKey(shardOf(key)));
}

describe('a federated decide batch and the shard fence', () => {
  it('answers what the calls answer one by one when the marker is missing: written once, at the first call', async () => {
    const [a = '', b = ''] = sameShardKeys();
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
    // Later calls with later clocks: one by one, the second call reads the marker the first one wrote.
    const calls = [callFor(a, T0), callFor(b, T0 + 5), callFor(a, T0 + 9)];
    await redis.flushall();
    const alone = await oneByOne(calls);
    const aloneMarker = await markerState(a);
    await redis.flushall();
    const together = await batch(calls);
    expect(together).toEqual(alone);
    expect(await markerState(a)).toEqual(aloneMarker);
    expect(aloneMarker).toEqual({ fence: String(T0) });
    // A fence at T0 holds the region's share at 0 until the fence's epoch is over: every call is denied.
    expect(together.map((reply) => (reply as number[])[0])).toEqual([0, 0, 0]);
  });

  it('reads one marker for a batch spanning shards on one redis-server; a Redis Cluster keeps one per shard', async () => {
    // Keys of eight different shards.
    const keys: string[] = [];
    const shards = new Set<number>();
    for (let i = 0; keys.length < 8; i++) {
      if (shards.has(shardOf(`s-${i}`))) continue;
      shards.add(shardOf(`s-${i}`));
      keys.push(`s-${i}`);
    }
    await redis.flushall();
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
    await redis.hset(layout.shardMarkerKey(0), 'fence', 0);
    await redis.config('RESETSTAT');
    const replies = await batch(keys.map((key, i) => callFor(key, T0 + i)));
    expect(replies.map((reply) => (reply as number[])[0])).toEqual(keys.map(() => 1));
    const stats = await redis.info('commandstats');
    expect(Number(/cmdstat_hget:calls=(\d+)/.exec(stats)?.[1] ?? 0), 'HGETs of the marker in one batch').toBe(1);
    expect(new Set(keys.map((key) => layout.shardMarkerKey(shardOf(key))))).toEqual(new Set([layout.shardMarkerKey(0)]));
    // A cluster's nodes lose data one by one, and a script keeps to one slot: a marker in each shard's slot.
    const cluster = layoutOf({ redis: { clusterNodes: ['127.0.0.1:7000'] } });
    expect(cluster.shardMarkerKey(5)).toBe('qf:{s5}:m');
    expect(layoutOf({ redis: {} }).shardMarkerKey(5)).toBe('qf:{s0}:m');
  });

  it('decides the next batch by a fence set after the last one', async () => {
    const [a = '', b = '', c = '', d = ''] = sameShardKeys();
    await redis.flushall();
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
    await redis.hset(layout.shardMarkerKey(shardOf(a)), 'fence', 0);
    const first = await batch([callFor(a, T0), callFor(b, T0 + 1)]);
    expect(first.map((reply) => (reply as number[])[0])).toEqual([1, 1]);
    // What recovery does when it finds the Redis lost data (fenceAllShards): every marker at Redis TIME.
    await redis.hset(layout.shardMarkerKey(shardOf(a)), 'fence', T0 + 2);
    // A key new since the fence starts empty and holds no share until the fence's epoch is over.
    const second = await batch([callFor(c, T0 + 3), callFor(d, T0 + 4)]);
    expect(second.map((reply) => (reply as number[])[0])).toEqual([0, 0]);
  });
});

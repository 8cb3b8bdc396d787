// One gossip job in one call (lua/includes/apply_job.lua, gossip-calls.ts runApplyJob): the replay check, every
// entry's merge in order, then the replay record and the heard mark. It must leave a Redis exactly as the separate
// calls do (the path a Redis Cluster and a server without Functions take), answer the same replies, write nothing
// for a replay, and write no record when an entry fails (so the job is retried). Two real redis-servers: one runs
// the job function, the other the separate calls (its user may not load functions, so the client falls back to
// EVALSHA).
import type { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { emptySlotCells, flattenSlot } from '../../src/federation/gossip/cells.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { KEY_SHARDS, layoutOf, shardOfKey } from '../../src/keys.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { withScripts, type ScriptedRedis } from '../../src/store/commands.ts';
import {
  applyGossipCall,
  JOB_PART_ENTRIES,
  runApplyJob,
  runReplayCheck,
  replayCall,
  type JobRecord,
} from '../../src/store/gossip-calls.ts';
import type { ScriptCall } from '../../src/store/script-call.ts';
import { client, useRedis } from '../harness/redis.ts';
import { middleRegion } from '../support/middle-region.ts';

const MINUTE = 60_000;
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % MINUTE) + 10_000;

const config = middleRegion([
  { name: 'tb', by: ['apiKey'], algorithm: 'tokenBucket', limit: 1000, period: MINUTE },
  { name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 300, period: MINUTE },
]);
const topology = topologyOf(config);
const layout = layoutOf(config);
const n = topology.regions.length;
const sender = topology.peerIndexes[0]!;
const third = topology.peerIndexes[1]!;
const epoch = Math.floor(T0 / MINUTE);
const [bucketRule, windowRule] = config.rules as [(typeof config.rules)[0], (typeof config.rules)[0]];

/** A job from `sender` seen at T0: a hungry bucket key (this idle region grants it), two merges of one window key. */
function jobCalls(prefix: string): ScriptCall[] {
  const hungry = emptySlotCells(epoch, n);
  hungry.c[sender] = 330;
  hungry.t[sender] = T0 - 1_000;
  const first = emptySlotCells(epoch, n);
  first.c[sender] = 7;
  // Admitting within the quiet span (1 s): the sender has not stopped, so this idle region grants it.
  first.t[sender] = T0 - 800;
  first.c[third] = 2;
  first.t[third] = T0 - 3_000;
  const later = { ...first, c: [...first.c], t: [...first.t] };
  later.c[sender] = 9;
  later.t[sender] = T0 - 500;
  const bucketKey = layout.ruleKey('tb', { principal: `${prefix}-hot`, dimensions: [`${prefix}-hot`] });
  const windowKey = layout.ruleKey('fw', { principal: `${prefix}-w`, dimensions: [`${prefix}-w`] });
  const call = (rule: typeof bucketRule, k: string, slot: typeof first, t: number) =>
    applyGossipCall(
      layoutOf(config),
      topology,
      rule,
      config.federation.leakageBudget,
      sender,
      { k, t, s: [flattenSlot(slot)] },
      { now: T0 },
    );
  return [
    call(bucketRule, bucketKey, hungry, T0 - 1_000),
    call(windowRule, windowKey, first, T0 - 800),
    call(windowRule, windowKey, later, T0 - 500),
  ];
}

function recordOf(seq: number): JobRecord {
  return { replayKey: layout.replayKey('a'), seq, retained: 20_000, metaKey: layout.metaKey, heardField: 'heard:a', heardAt: T0 };
}

/** Every key of the server with its type, its content (sorted) and whether it expires. */
async function snapshot(redis: Redis | Cluster): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of (await redis.keys('*')).sort()) {
    const type = await redis.type(key);
    let value: unknown;
    if (type === 'hash') value = Object.entries(await redis.hgetall(key)).sort();
    else if (type === 'zset') value = await redis.zrange(key, '0', '-1', 'WITHSCORES');
    else if (type === 'set') value = (await redis.smembers(key)).sort();
    else if (type === 'string') value = await redis.get(key);
    else value = type;
    out[key] = { type, value, expires: (await redis.pttl(key)) > 0 };
  }
  return out;
}

describe('one gossip job in one call (apply_job.lua)', async () => {
  const jobServer = await useRedis();
  const stepsServer = await useRedis();
  const jobRedis = withScripts(client(jobServer.url));
  const admin = client(stepsServer.url);
  // A user without FUNCTION: the client's library load is refused (NOPERM) and it runs the separate scripts.
  await admin.call('ACL', 'SETUSER', 'steps', 'on', 'nopass', '~*', '&*', '+@all', '-function');
  const stepsRedis: ScriptedRedis = withScripts(client(stepsServer.url.replace('redis://', 'redis://steps:x@')));

  const run = async (redis: ScriptedRedis, seq: number, prefix: string, calls = jobCalls(prefix)) =>
    runApplyJob(redis, recordOf(seq), calls);

  it('leaves the Redis and answers exactly as the separate calls do', async () => {
    await markShardsIntact(jobRedis);
    await markShardsIntact(stepsRedis);
    const viaJob = await run(jobRedis, 1_000_001, 'same');
    const viaSteps = await run(stepsRedis, 1_000_001, 'same');
    // The separate calls really ran as scripts: the steps server holds no library.
    expect(await admin.call('FUNCTION', 'LIST')).toEqual([]);
    expect((await jobRedis.call('FUNCTION', 'LIST')) as unknown[]).toHaveLength(1);
    expect(viaJob).toEqual(viaSteps);
    expect(viaJob.replayed).toBe(false);
    if (viaJob.replayed) return;
    // Every merge changed its key; this idle region granted the hungry bucket and the window on its first merge,
    // and had nothing more to give on the second.
    expect(viaJob.replies.map((reply) => [reply.changed, reply.granted])).toEqual([
      [true, true],
      [true, true],
      [true, false],
    ]);
    expect(await snapshot(jobRedis)).toEqual(await snapshot(stepsRedis));
    // The grant's moved tokens (`a` cells of the bucket) in their shortest exact text (fmt_short): a text of more
    // than 15 significant digits is one the fewer digits would not read back as.
    const bucket = await jobRedis.hgetall(layout.ruleKey('tb', { principal: 'same-hot', dimensions: ['same-hot'] }));
    const moved = Object.entries(bucket).filter(([field]) => field.startsWith('a'));
    expect(moved.length).toBeGreaterThan(0);
    for (const [field, text] of moved) {
      const digits = text.replace(/^-/, '').replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').length;
      if (digits > 15) expect(Number(Number(text).toPrecision(digits - 1)), `${field} = ${text}`).not.toBe(Number(text));
    }
    expect(await jobRedis.hget(layout.metaKey, 'heard:a')).toBe(String(T0));
    expect(await runReplayCheck(jobRedis, replayCall(layout.replayKey('a'), 1_000_001, 20_000))).toBe(true);
  });

  it('applies a long job in parts, one call per JOB_PART_ENTRIES entries, exactly as the separate calls do', async () => {
    const calls = Array.from({ length: 14 }, (_, i) => jobCalls(`long-${i}`)).flat();
    expect(calls.length).toBeGreaterThan(2 * JOB_PART_ENTRIES);
    const fcalls = async () => Number(/cmdstat_fcall:calls=(\d+)/.exec(String(await jobRedis.info('commandstats')))?.[1] ?? 0);
    const before = await fcalls();
    const viaJob = await run(jobRedis, 1_000_003, 'long-job', calls);
    expect((await fcalls()) - before).toBe(Math.ceil(calls.length / JOB_PART_ENTRIES));
    const viaSteps = await run(stepsRedis, 1_000_003, 'long-job', calls);
    expect(viaJob).toEqual(viaSteps);
    expect(viaJob.replayed === false && viaJob.replies.length).toBe(calls.length);
    expect(await snapshot(jobRedis)).toEqual(await snapshot(stepsRedis));
    expect(await runApplyJob(jobRedis, recordOf(1_000_003), calls)).toEqual({ replayed: true });
  });

  it('leaves the bells silent when asked (quiet), answers the lanes the separate calls rang, and hands over its grants', async () => {
    const bells = Array.from({ length: KEY_SHARDS }, (_, shard) => layout.bellKey(shard));
    await jobRedis.del(...bells);
    await stepsRedis.del(...bells);
    const calls = Array.from({ length: 6 }, (_, i) => jobCalls(`quiet-${i}`)).flat();
    const quiet = await runApplyJob(jobRedis, recordOf(1_000_004), calls, true);
    // The steps path cannot be quiet: it rings, keeps the grants in the fast-lane sets, and tells what it rang.
    const rung = await runApplyJob(stepsRedis, recordOf(1_000_004), calls, true);
    if (quiet.replayed || rung.replayed) throw new Error('a fresh job answered as a replay');
    const merges = (replies: typeof quiet.replies) => replies.map(({ changed, lagMs, granted }) => ({ changed, lagMs, granted }));
    expect(merges(quiet.replies)).toEqual(merges(rung.replies));
    expect(rung.replies.every((reply) => reply.handed === undefined)).toBe(true);
    // Each key granted in is handed over once, on its last granting reply, with the state the merges left.
    const keyOf = (i: number) => calls[i]!.keys[0]!;
    const granted = [...new Set(quiet.replies.flatMap((reply, i) => (reply.granted ? [keyOf(i)] : [])))];
    expect(granted.length).toBe(12);
    const handed = quiet.replies.flatMap((reply, i) => (reply.handed === undefined ? [] : [i]));
    expect(handed.map(keyOf).sort()).toEqual([...granted].sort());
    const pairs = (flat: readonly string[]) => Array.from({ length: flat.length / 2 }, (_, j) => [flat[2 * j], flat[2 * j + 1]]).sort();
    for (const i of handed) {
      expect(quiet.replies.slice(i + 1).some((reply, j) => reply.granted && keyOf(i + 1 + j) === keyOf(i))).toBe(false);
      expect(pairs(quiet.replies[i]!.handed!)).toEqual(Object.entries(await stepsRedis.hgetall(keyOf(i))).sort());
    }
    // The lanes the separate calls rang, less the fast lane's bit for a key handed over (its set holds nothing of it).
    quiet.replies.forEach((reply, i) => {
      const lanes = rung.replies[i]!.lanes;
      expect(reply.lanes).toBe(granted.includes(keyOf(i)) && lanes > 0 ? lanes & ~1 : lanes);
    });
    // The Redis as the separate calls leave it, but for the bells (none rung) and the handed keys' fast-lane sets.
    expect(await jobRedis.exists(...bells)).toBe(0);
    for (const key of granted) {
      const fast = layout.fastSetKey(shardOfKey(key));
      expect(await jobRedis.sismember(fast, key)).toBe(0);
      expect(await stepsRedis.sismember(fast, key)).toBe(1);
    }
    // Each shard's bell on the steps server names the lanes of that shard's replies together (bell.lua merges them).
    const masks = new Map<number, number>();
    rung.replies.forEach((reply, i) => {
      const shard = shardOfKey(keyOf(i));
      if (reply.lanes !== 0) masks.set(shard, (masks.get(shard) ?? 0) | reply.lanes);
    });
    expect(masks.size).toBeGreaterThan(0);
    // Granted: the fast lane's bit.
    expect(rung.replies.filter((reply) => reply.granted).every((reply) => (reply.lanes & 1) === 1)).toBe(true);
    for (const [shard, mask] of masks) expect(await stepsRedis.lrange(layout.bellKey(shard), 0, -1)).toEqual([`L${mask}`]);
    expect((await stepsRedis.exists(...bells)) - masks.size).toBe(0);
    await stepsRedis.del(...bells);
    for (const key of granted) await stepsRedis.srem(layout.fastSetKey(shardOfKey(key)), key);
    expect(await snapshot(jobRedis)).toEqual(await snapshot(stepsRedis));
    // A call of its own afterwards rings and keeps its grant again (the library's flag does not outlive the quiet call).
    const again = jobCalls('quiet-after');
    const reply = await runApplyJob(jobRedis, recordOf(1_000_005), again);
    expect(reply.replayed === false && reply.replies[0]!.lanes).not.toBe(0);
    expect(reply.replayed === false && reply.replies.every((r) => r.handed === undefined)).toBe(true);
    expect(await jobRedis.exists(layout.bellKey(shardOfKey(again[0]!.keys[0]!)))).toBe(1);
    expect(await jobRedis.sismember(layout.fastSetKey(shardOfKey(again[0]!.keys[0]!)), again[0]!.keys[0]!)).toBe(1);
  });

  it('writes nothing for a job it applied already', async () => {
    const before = await snapshot(jobRedis);
    expect(await runApplyJob(jobRedis, { ...recordOf(1_000_001), heardAt: T0 + 5 }, jobCalls('other'))).toEqual({ replayed: true });
    expect(await snapshot(jobRedis)).toEqual(before);
  });

  it('writes no record when an entry fails, so the retried job applies', async () => {
    const calls = jobCalls('broken');
    // The window key is a list: its merge raises WRONGTYPE.
    await jobRedis.rpush(calls[1]!.keys[0]!, 'not a state key');
    await expect(runApplyJob(jobRedis, recordOf(1_000_002), calls)).rejects.toThrow(/WRONGTYPE/);
    expect(await runReplayCheck(jobRedis, replayCall(layout.replayKey('a'), 1_000_002, 20_000))).toBe(false);
    await jobRedis.del(calls[1]!.keys[0]!);
    const retried = await runApplyJob(jobRedis, recordOf(1_000_002), calls);
    expect(retried.replayed).toBe(false);
    expect(await runReplayCheck(jobRedis, replayCall(layout.replayKey('a'), 1_000_002, 20_000))).toBe(true);
  });
});

// The federated decide library keeps the last prepared arguments between FCALLs (lua/includes/decide_batch.lua
// `kept`): a batch whose calls carry the same argument strings as the previous one reuses their rules and
// parameters. Against two real redis-servers, the same batches run on one library that keeps them and on one
// reloaded before every batch (FUNCTION LOAD REPLACE: fresh upvalues, every batch prepared anew) answer the same
// replies and leave the same state: through admissions that turn keys loud, denials, a local lease's take (which
// changes a rule's cost while it runs), a run of other arguments in between, and a recovery marker deleted between
// two batches (the next batch must fence, not reuse the last batch's fence memo).
import { describe, expect, it } from 'vitest';
import { keyLayout } from '../../src/keys.ts';
import { decideBatchArgs, unpackBatchReply } from '../../src/store/decide-calls.ts';
import { decideLibrary } from '../../src/store/library.ts';
import { client, useRedis } from '../harness/redis.ts';
import { federatedDecideCall, type FederatedTestRule } from '../support/decide-call.ts';

const kept = client((await useRedis()).url);
const fresh = client((await useRedis()).url);
const layout = keyLayout();
const library = decideLibrary('decide');
const T0 = 1_800_000_000_000;

const BUCKET: FederatedTestRule = { name: 'tb', head: ['tb', 30, 60_000, 30], budget: 3 };
const WINDOW: FederatedTestRule = { name: 'fw', head: ['fw', 12, 60_000, 12], budget: 3 };

const call = federatedDecideCall;

async function state(redis: typeof kept): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of (await redis.keys('*')).sort()) {
    const type = await redis.type(key);
    out[key] =
      type === 'string'
        ? await redis.getBuffer(key).then((b) => b?.toString('base64'))
        : type === 'hash'
          ? await redis.hgetall(key)
          : type === 'set'
            ? (await redis.smembers(key)).sort()
            : type === 'zset'
              ? await redis.zrange(key, '0', '-1', 'WITHSCORES')
              : type;
  }
  return out;
}

describe('the decide library keeps its last prepared runs between batches', () => {
  it('answers and writes what a library prepared anew for every batch does', async () => {
    for (const redis of [kept, fresh]) {
      await redis.flushall();
      await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
      for (let s = 0; s < 64; s++) await redis.hset(layout.shardMarkerKey(s), 'fence', 0);
    }
    const keys = ['a', 'b', 'c', 'd', 'e'];
    // Three phases of one clock each, three batches a phase (the same arguments: kept), with other runs between.
    const batches: (string | number)[][][] = [];
    for (let phase = 0; phase < 3; phase++) {
      const now = T0 + phase * 5_000;
      for (let b = 0; b < 3; b++) {
        batches.push(keys.flatMap((key) => [call(key, BUCKET, now), call(key, BUCKET, now)]));
        batches.push(keys.map((key) => call(key, WINDOW, now)));
        batches.push(keys.map((key) => call(`lease-${key}`, BUCKET, now, 4)));
      }
    }
    const lost = 10;
    const replies: { kept: unknown[][]; fresh: unknown[][] } = { kept: [], fresh: [] };
    for (const [i, calls] of batches.entries()) {
      // Between two batches of the same arguments, this Redis loses its recovery markers (every shard's, as a
      // restart without persistence would): the next batch fences.
      if (i === lost) for (const redis of [kept, fresh]) await redis.del(...Array.from({ length: 64 }, (_, s) => layout.shardMarkerKey(s)));
      await fresh.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
      for (const [name, redis] of [
        ['kept', kept],
        ['fresh', fresh],
      ] as const) {
        replies[name].push(unpackBatchReply(await redis.call('FCALL', library.batchFn, ...decideBatchArgs(calls)), calls.length));
      }
    }
    expect(replies.kept).toEqual(replies.fresh);
    expect(await state(kept)).toEqual(await state(fresh));
    // The schedule reached what it is for: admissions, denials, loud keys (hashes) and a fence after the loss.
    const verdicts = replies.kept.flat().map((reply) => (reply as number[])[0]);
    expect(verdicts).toContain(1);
    expect(verdicts).toContain(0);
    expect(Object.values(await state(kept)).some((value) => typeof value === 'object' && value !== null && 'tokens' in value)).toBe(true);
    expect((await kept.hget(layout.shardMarkerKey(0), 'fence')) ?? '').not.toBe('0');
  });
});

// The decide batch's packed reply (lua/includes/batch.lua batch_packer, src/store/decide-calls.ts unpackBatchReply)
// on a real redis-server: a packed row reads exactly the integers Redis sends for the same Lua table (fractions
// truncated toward zero, negatives, millisecond clocks, 2^40 to 2^52), a call that raised answers its error in
// its place, and a reply of another shape is refused with the script's name rather than read as wrong numbers.
import { describe, expect, it } from 'vitest';
import { unpackBatchReply } from '../../src/store/decide-calls.ts';
import { scriptSource } from '../../src/store/lua-source.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);
const PACKER = scriptSource('includes/batch');

/** Lua tables of numbers that Redis turns into integer replies, and the packer must write the same way. */
const TABLES = [
  '{ 1, 1765072800123, 1, 999, 1765072860000, 0, 0, 999, 0 }',
  '{ 0, 1765072800123, 0, 3.7, 1765072860000, 59999.99, 1, 2.5, 0 }',
  '{ -1, -2.5, -0.4, 0.4, 2^40 + 0.5, 2^52, 2^50 - 1 }',
  '{ 7 }',
];

describe('the decide batch reply, packed', () => {
  it('reads the same integers as the nested reply, call by call', async () => {
    const nested = await redis.eval(`return { ${TABLES.join(', ')} }`, 0);
    const packed = await redis.eval(
      `${PACKER}\nlocal add, add_one, done = batch_packer()\n${TABLES.map((table) => `add(true, ${table})`).join('\n')}
-- The same numbers as one rule's nine, answered by a function under pcall (the single-region paths).
add_one(pcall(function() return unpack(${TABLES[1]}) end))
return done()`,
      0,
    );
    expect(unpackBatchReply(packed, TABLES.length + 1)).toEqual([...(nested as unknown[]), (nested as unknown[])[1]]);
  });

  it('answers a call that raised, or that answered no numbers, with an error in its place', async () => {
    const packed = await redis.eval(
      `${PACKER}
local add, add_one, done = batch_packer()
add(true, { 1, 2 })
add(pcall(function() return redis.call('INCR', 'batch-reply-counter') end))
add(pcall(function() return redis.call('HSET', 'batch-reply-hash') end))
add(true, { 3 })
add(true, {})
add(true, { 'x' })
add_one(pcall(function() error('no clock') end))
add_one(pcall(function() return 1, 'soon', 1, 0, 0, 0, 0, 0, 0 end))
return done()`,
      0,
    );
    const replies = unpackBatchReply(packed, 8);
    expect(replies[0]).toEqual([1, 2]);
    // INCR answers an integer, not a table: not packable.
    expect(replies[1]).toBeInstanceOf(Error);
    expect((replies[1] as Error).message).toMatch(/not packable: number/);
    // A Redis error raised in the call (pcall's table with err), answered as that error.
    expect(replies[2]).toBeInstanceOf(Error);
    expect((replies[2] as Error).message).toMatch(/wrong number of args/i);
    expect(replies[3]).toEqual([3]);
    expect((replies[4] as Error).message).toMatch(/not packable/);
    expect((replies[5] as Error).message).toMatch(/not packable/);
    expect((replies[6] as Error).message).toMatch(/no clock/);
    expect((replies[7] as Error).message).toMatch(/not packable/);
  });

  it('refuses a reply of another shape, naming the script', () => {
    expect(() => unpackBatchReply([[1, 2], [3]], 2)).toThrow(/decide_batch.*packed text/);
    expect(() => unpackBatchReply('1,2', 1)).toThrow(/decide_batch/);
    expect(() => unpackBatchReply(['1,2;3'], 3)).toThrow(/3 calls' rows/);
    expect(() => unpackBatchReply(['1,,2'], 1)).toThrow(/rows of integers/);
    expect(() => unpackBatchReply(['1,2.5'], 1)).toThrow(/rows of integers/);
    expect(() => unpackBatchReply(['1;!x'], 2)).toThrow(/rows of integers/);
    expect(() => unpackBatchReply(['1-2'], 1)).toThrow(/rows of integers/);
    expect(unpackBatchReply(['!;-12,0'], 2)).toEqual([new Error('decide batch call failed: undefined'), [-12, 0]]);
  });
});

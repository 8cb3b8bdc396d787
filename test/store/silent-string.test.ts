// A silent key's string in state layout 4 (lua/includes/silent_string.lua, src/store/silent-string.ts) on a real
// redis-server: the MessagePack array the Lua writes for a token bucket or a window reads back as exactly the numbers
// it was given (doubles, millisecond clocks, epoch ids, -0), the TS side reads it as the very hash texts the Lua's
// `fmt` writes, and a layout-3 text string is still read as the same values.
import { describe, expect, it } from 'vitest';
import { scriptSource } from '../../src/store/lua-source.ts';
import { luaNumberText, silentStringFields } from '../../src/store/silent-string.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);
const SILENT_STRING = scriptSource('includes/silent_string');

/** The 13 values `reader` (silent_string_values or window_string_values) reads at `key`: numbers as fmt writes them. */
async function readValues(reader: 'silent_string_values' | 'window_string_values', key: string): Promise<string[]> {
  return (await redis.eval(
    `${SILENT_STRING}\nlocal v = ${reader}(redis.call('GET', KEYS[1]))\nlocal out = {}\n` +
      `for i = 1, 13 do out[i] = type(v[i]) == 'number' and fmt(v[i]) or tostring(v[i]) end\nreturn out`,
    1,
    key,
  )) as string[];
}

/** Numbers a bucket's fields take, and the edges of fmt's two forms. */
const NUMBERS = [
  1,
  3,
  600,
  299.99999999999994,
  996.98333333333335,
  0.1,
  1 / 3,
  2 / 3,
  1e-5,
  1.5e-4,
  0.00012345678901234567,
  1e14,
  1e15 - 1,
  1e15,
  1e15 + 0.5,
  2 ** 52 + 1,
  1e16 + 2,
  1e17,
  519702637728873 + 0.125,
  519702637728873 + 0.375,
  0.5,
  2 ** -30,
  5e-324,
  1.7976931348623157e308,
  1.2345678901234568e21,
  1765072800123,
  1765072800123.5,
  29417880,
  -1,
  -2.5,
  -1e-7,
  12.5,
  100.25,
];

describe('a silent string, layout 4', () => {
  it("luaNumberText writes each number as the scripts' fmt does", async () => {
    const random = Array.from({ length: 200 }, (_, i) => (Math.random() - 0.3) * 10 ** ((i % 24) - 8));
    const numbers = [...NUMBERS, ...random];
    const texts = (await redis.eval(
      `${scriptSource('includes/fmt')}\nlocal out = {}\nfor i, text in ipairs(ARGV) do out[i] = fmt(tonumber(text)) end\nreturn out`,
      0,
      ...numbers.map((n) => n.toPrecision(17)),
    )) as string[];
    expect(numbers.map((n) => luaNumberText(Number(n.toPrecision(17))))).toEqual(texts);
    expect(luaNumberText(-0)).toBe('-0');
    expect(luaNumberText(0)).toBe('0');
  });

  it('reads back exactly the numbers written, and the TS side reads the hash texts', async () => {
    const key = 'silent-string-test';
    for (const value of NUMBERS) {
      const written = [value, 1765072800123, 333333, 29417880, false, false, false, 17, 1765072800123, false, false, false];
      await redis.eval(
        `${SILENT_STRING}\nlocal v = cjson.decode(ARGV[1])\nfor i = 2, 13 do if v[i] == cjson.null then v[i] = false end end\nv[2] = tonumber(ARGV[2])\n` +
          `redis.call('SET', KEYS[1], silent_string_packed(v, 0))`,
        1,
        key,
        JSON.stringify(['0', ...written.map((w) => (w === false ? null : w))]),
        value.toPrecision(17),
      );
      const held = (await redis.getBuffer(key))!;
      expect(held[0]).toBe(0x9d);
      const read = (await redis.eval(
        `${SILENT_STRING}\nlocal v = silent_string_values(redis.call('GET', KEYS[1]))\nreturn { string.format('%.17g', v[2]), tostring(v[5]), tostring(v[6]), v[1] }`,
        1,
        key,
      )) as string[];
      expect(read.slice(1)).toEqual(['29417880', 'false', '0']);
      expect(Number(read[0])).toBe(Number(value.toPrecision(17)));
      const hashTexts = (await redis.eval(`${SILENT_STRING}\nreturn silent_string_hash(redis.call('GET', KEYS[1]))`, 1, key)) as string[];
      const fields = silentStringFields(held)!;
      expect(Object.entries(fields).flat()).toEqual(hashTexts);
      expect(fields.tokens).toBe(luaNumberText(Number(value.toPrecision(17))));
    }
  });

  it('keeps -0 as -0', async () => {
    const key = 'silent-string-negative-zero';
    await redis.eval(
      // -zero at run time: a -0 constant in the source would be folded into the chunk's 0.
      `${SILENT_STRING}\nlocal zero = tonumber(ARGV[1])\nredis.call('SET', KEYS[1], silent_string_packed({ '1', -zero, 5, 6, 7, false, false, false, false, false, false, false, false }, 0))`,
      1,
      key,
      '0',
    );
    const held = (await redis.getBuffer(key))!;
    expect(silentStringFields(held)!.tokens).toBe('-0');
    const sign = await redis.eval(
      `${SILENT_STRING}\nlocal v = silent_string_values(redis.call('GET', KEYS[1]))\nreturn tostring(1 / tonumber(v[2]))`,
      1,
      key,
    );
    expect(sign).toBe('-inf');
  });

  it('keeps a -0 read from a layout-3 string when a decision packs it again without writing it', async () => {
    const key = 'silent-string-layout-3-negative-zero';
    // Layout 3: tokens 5, last refill 5, sig 6, w0 7, slot 0's count -0, the rest absent. A decision of slot 1 writes
    // values 2 to 4 and 6 (silent_bucket.lua silent_store): here only slot 1's epoch id, so slot 0's -0 goes back
    // as it was read.
    await redis.set(key, 'S1|5|5|6|7|||-0|||||');
    await redis.eval(
      `${SILENT_STRING}\nlocal v = silent_string_values(redis.call('GET', KEYS[1]))\nv[6] = 29417880\nredis.call('SET', KEYS[1], silent_string_packed(v, 1))`,
      1,
      key,
    );
    const held = (await redis.getBuffer(key))!;
    expect(held[0]).toBe(0x9d);
    expect(silentStringFields(held)).toMatchObject({ tokens: '5', w0: '7', w1: '29417880', 'c0.1': '-0' });
  });

  it("writes a window's values as an array of 14 and reads them back, as the hash's texts on the TS side", async () => {
    const key = 'silent-string-window';
    await redis.eval(
      `${SILENT_STRING}\nlocal v = { '2', 29417880, false, 29417879, 7, 1765072800123.5, 2.5, false, false, false, 3, 1765072740000, false }\n` +
        `redis.call('SET', KEYS[1], window_string_packed(v))`,
      1,
      key,
    );
    const values = await readValues('window_string_values', key);
    const hashTexts = (await redis.eval(`${SILENT_STRING}\nreturn silent_string_hash(redis.call('GET', KEYS[1]))`, 1, key)) as string[];
    expect(values).toEqual([
      '2',
      '29417880',
      'false',
      '29417879',
      '7',
      '1765072800123.5',
      '2.5',
      'false',
      'false',
      'false',
      '3',
      '1765072740000',
      'false',
    ]);
    const held = (await redis.getBuffer(key))!;
    expect(held[0]).toBe(0x9e);
    expect(Object.entries(silentStringFields(held)!).flat()).toEqual(hashTexts);
    expect(silentStringFields(held)).toEqual({
      z: '1',
      w0: '29417880',
      w2: '29417879',
      'c0.2': '7',
      't0.2': '1765072800123.5',
      'a0.2.2': '2.5',
      'c2.2': '3',
      't2.2': '1765072740000',
    });
    // A bucket's reader does not take a window's array, nor a window's reader a bucket's.
    expect(await redis.eval(`${SILENT_STRING}\nreturn silent_string_values(redis.call('GET', KEYS[1])) == nil`, 1, key)).toBe(1);
  });

  it('reads only what is a layout-4 string: another count, another tag or bytes cut short are not one', async () => {
    const held = async (script: string, key: string) => redis.eval(`${SILENT_STRING}\n${script}`, 1, key);
    const key = 'silent-string-not-one';
    // A bucket's header (an array of 13) over 12 values, and over 14: neither reader takes it, nor the conversion.
    for (const count of [12, 14]) {
      await held(
        `redis.call('SET', KEYS[1], '\\157' .. cmsgpack.pack(${Array.from({ length: count }, (_, i) => (i === 0 ? "'0'" : String(i))).join(', ')}))`,
        key,
      );
      expect(await held(`return silent_string_values(redis.call('GET', KEYS[1])) == nil`, key)).toBe(1);
      expect(await held(`return silent_string_hash(redis.call('GET', KEYS[1])) == nil`, key)).toBe(1);
    }
    // A window's header (14) whose first value is not the text 'W'.
    await held(`redis.call('SET', KEYS[1], cmsgpack.pack({ 'X', '0', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }))`, key);
    expect((await redis.getBuffer(key))![0]).toBe(0x9e);
    expect(await held(`return window_string_values(redis.call('GET', KEYS[1])) == nil`, key)).toBe(1);
    expect(await held(`return silent_string_hash(redis.call('GET', KEYS[1])) == nil`, key)).toBe(1);
    // A bucket's string cut short: the decide path's reader raises (that call's error), the conversion answers nil.
    await held(
      `local v = { '0', 1.5, 1765072800123, 333333, 29417880, false, false, 3, 1765072800123, false, false, false, false }\n` +
        `redis.call('SET', KEYS[1], string.sub(silent_string_packed(v, 0), 1, 20))`,
      key,
    );
    await expect(held(`return silent_string_values(redis.call('GET', KEYS[1]))`, key)).rejects.toThrow();
    expect(await held(`return silent_string_hash(redis.call('GET', KEYS[1])) == nil`, key)).toBe(1);
  });

  it('reads a layout-3 text string as the same values', async () => {
    const text = 'S0|996.98333333333335|1765072800123|333333|29417880|||17|1765072800123||||';
    const key = 'silent-string-layout-3';
    await redis.set(key, text);
    const values = await readValues('silent_string_values', key);
    expect(values).toEqual([
      '0',
      '996.98333333333335',
      '1765072800123',
      '333333',
      '29417880',
      'false',
      'false',
      '17',
      '1765072800123',
      'false',
      'false',
      'false',
      'false',
    ]);
    const window = 'W1|29417880|||4|1765072800123|4||||||';
    await redis.set(key, window);
    const windowValues = await readValues('window_string_values', key);
    expect(windowValues).toEqual([
      '1',
      '29417880',
      'false',
      'false',
      '4',
      '1765072800123',
      '4',
      'false',
      'false',
      'false',
      'false',
      'false',
      'false',
    ]);
    expect(silentStringFields(Buffer.from(text))).toEqual({
      z: '1',
      tokens: '996.98333333333335',
      last_refill: '1765072800123',
      sig: '333333',
      w0: '29417880',
      'c0.0': '17',
      't0.0': '1765072800123',
    });
  });
});

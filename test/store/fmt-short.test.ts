// lua/includes/fmt_short.lua's fmt_short on a real redis-server: the text a state hash stores for an `a` cell (a token
// bucket's moved tokens y) reads back as exactly the double written, like fmt's %.17g, in as few significant digits
// as that takes (333.333 as "333.333", where %.17g writes "333.33300000000003"). test/federation/apply-job.test.ts
// checks the cells a grant stores.
import { describe, expect, it } from 'vitest';
import { scriptSource } from '../../src/store/lua-source.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);
const FMT = scriptSource('includes/fmt_short');

/** A number as sent to the Lua: its 17 digits, which tonumber reads back as the same double ('-0' for -0). */
const sent = (n: number): string => (Object.is(n, -0) ? '-0' : n.toPrecision(17));

/** fmt and fmt_short of each number. */
async function texts(numbers: readonly number[]): Promise<{ full: string[]; short: string[] }> {
  const [full, short] = (await redis.eval(
    `${FMT}\nlocal full, short = {}, {}\nfor i, text in ipairs(ARGV) do\n  local v = tonumber(text)\n  full[i], short[i] = fmt(v), fmt_short(v)\nend\nreturn { full, short }`,
    0,
    ...numbers.map(sent),
  )) as [string[], string[]];
  return { full, short };
}

describe('fmt_short: the shortest exact text of a cell', () => {
  it('reads back as the very double fmt writes, never longer, and shorter for short decimals', async () => {
    // Shares and moved tokens as the protocol computes them (units / 1,000, thirds of a limit), awkward doubles
    // (0.1 + 0.2, 1/3), whole numbers, tiny and huge magnitudes, negatives and -0, and random doubles.
    const computed = [333_333 / 1000, 1000 / 3, 0.1 + 0.2, 305.27185728333313, 1 / 3, 2 / 3, 12.5, 100.25, -2.5, -1e-7];
    const edges = [0, -0, 1, 7, 1e15, 1e15 + 1, 2 ** 53, 5e-324, 1.7976931348623157e308];
    const random = Array.from({ length: 300 }, (_, i) => (Math.random() - 0.3) * 10 ** ((i % 24) - 8));
    const numbers = [...computed, ...edges, ...random];
    const { full, short } = await texts(numbers);
    numbers.forEach((value, i) => {
      expect(Object.is(Number(short[i]), Number(full[i])), `${short[i]} against ${full[i]}`).toBe(true);
      expect(Object.is(Number(short[i]), Number(sent(value)))).toBe(true);
      expect(short[i]!.length).toBeLessThanOrEqual(full[i]!.length);
    });
    // The cases it is for: a third of a 1,000 limit in share units, read as tokens.
    expect(short[0]).toBe('333.333');
    expect(full[0]).toBe('333.33300000000003');
    // Whole numbers and -0 as fmt writes them.
    expect(short[numbers.indexOf(1e15 + 1)]).toBe(full[numbers.indexOf(1e15 + 1)]);
    expect(short[computed.length + 1]).toBe('-0');
    expect(short[computed.length + 3]).toBe('7');
    // A double that needs all 17 digits keeps fmt's text; one that needs 16 loses the 17th.
    expect(short[2]).toBe('0.30000000000000004');
    expect(short[2]).toBe(full[2]);
    expect(short[3]).toBe(full[3]);
    expect(short[4]).toBe('0.3333333333333333');
    expect(full[4]).toBe('0.33333333333333331');
  });
});

// A federated decision reads a key's hash once (lua/includes/federation.lua silent_hash_read): the silent test and the
// general path share one HGETALL (and one read of the recovery marker), for the token bucket and both windows.
// Counted on a real redis-server through the slow log, which lists the commands a script runs.
import { describe, expect, it } from 'vitest';
import { keyLayout, shardOf } from '../../src/keys.ts';
import { decideLibrary } from '../../src/store/library.ts';
import { client, useRedis } from '../harness/redis.ts';
import { federatedDecideCall } from '../support/decide-call.ts';

const server = await useRedis();
const redis = client(server.url);
const layout = keyLayout();
const library = decideLibrary('decide');
const NOW = 1_800_000_000_000;
const PERIOD = 60_000;

function call(algorithm: 'fw' | 'sw' | 'tb', key: string, now: number): (string | number)[] {
  return federatedDecideCall(key, { name: 'r', head: [algorithm, 100, PERIOD, 100], budget: 5 }, now);
}

/** The commands one decide runs inside Redis, in order (SLOWLOG with every command logged). */
async function commandsOf(args: (string | number)[]): Promise<string[]> {
  await redis.config('SET', 'slowlog-log-slower-than', '0');
  await redis.slowlog('RESET');
  await redis.call('FCALL', library.fn, ...args);
  const log = (await redis.slowlog('GET', 1000)) as [number, number, number, string[]][];
  await redis.config('SET', 'slowlog-log-slower-than', '10000');
  return log
    .map((entry) => entry[3][0]!.toUpperCase())
    .reverse()
    .filter((name) => name !== 'SLOWLOG' && name !== 'FCALL');
}

describe('a federated decision reads the key hash once', () => {
  for (const algorithm of ['tb', 'fw', 'sw'] as const) {
    it(`${algorithm}: a loud hash (another region's cell, no z) and a silent one (z) take one HGETALL and no HMGET`, async () => {
      await redis.flushall();
      await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
      const key = `loud-${algorithm}`;
      const shard = shardOf(key);
      const stateKey = layout.stateKey(shard, 'r', key);
      await redis.hset(layout.shardMarkerKey(shard), 'fence', 0);
      const slot = Math.floor(NOW / PERIOD) % 3;
      // What apply_gossip leaves: the slot's id and a peer's count, without z.
      await redis.hset(stateKey, `w${slot}`, Math.floor(NOW / PERIOD), `c${slot}.1`, 3);
      const loud = await commandsOf(call(algorithm, key, NOW));
      expect(loud.filter((name) => name === 'HGETALL')).toHaveLength(1);
      expect(loud).not.toContain('HMGET');
      // The recovery marker too is read once (a token bucket's silent test reads it before the general path).
      expect(loud.filter((name) => name === 'HGET')).toHaveLength(1);

      const silentKey = `silent-${algorithm}`;
      const silentState = layout.stateKey(shardOf(silentKey), 'r', silentKey);
      await redis.hset(layout.shardMarkerKey(shardOf(silentKey)), 'fence', 0);
      // A silent key's hash (silent_string_to_hash leaves z = 1 and this region's own cells).
      await redis.hset(silentState, 'z', 1, `w${slot}`, Math.floor(NOW / PERIOD), `c${slot}.0`, 2);
      const silent = await commandsOf(call(algorithm, silentKey, NOW));
      expect(silent.filter((name) => name === 'HGETALL')).toHaveLength(1);
      expect(silent).not.toContain('HMGET');
    });
  }
});

describe("a loud key's next silent test", () => {
  it('reads its hash at once, without a GET that fails first; a key that is a string again is read as one', async () => {
    await redis.flushall();
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
    const key = 'hinted-tb';
    const shard = shardOf(key);
    const stateKey = layout.stateKey(shard, 'r', key);
    await redis.hset(layout.shardMarkerKey(shard), 'fence', 0);
    const slot = Math.floor(NOW / PERIOD) % 3;
    await redis.hset(stateKey, `w${slot}`, Math.floor(NOW / PERIOD), `c${slot}.1`, 3);
    // The first decision finds the hash behind a failing GET, and remembers it.
    const first = await commandsOf(call('tb', key, NOW));
    expect(first.filter((name) => name === 'GET' || name === 'HGETALL')).toEqual(['GET', 'HGETALL']);
    const second = await commandsOf(call('tb', key, NOW + 1));
    expect(second).not.toContain('GET');
    expect(second.filter((name) => name === 'HGETALL')).toHaveLength(1);

    // Gone (an operator's DEL, an expiry): decided as a new key, its silent string written.
    await redis.del(stateKey);
    const fresh = await commandsOf(call('tb', key, NOW + 2));
    expect(fresh).toContain('SET');
    expect(await redis.type(stateKey)).toBe('string');
    // A string again: the hint is gone, the next decision reads it with one GET and no HGETALL.
    const again = await commandsOf(call('tb', key, NOW + 3));
    expect(again).toContain('GET');
    expect(again).not.toContain('HGETALL');
    const reply = (await redis.call('FCALL', library.fn, ...call('tb', key, NOW + 4))) as number[];
    expect(reply[0]).toBe(1);
  });
});

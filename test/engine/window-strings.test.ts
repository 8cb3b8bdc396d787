// A silent federated window is one string (state layouts 3 and 4, lua/includes/silent_string.lua) standing for the hash
// the hash path writes, on a real redis-server: the same decisions on a new key (the string) and on a key that is
// already a silent hash, fields compared after every step; the string becomes that very hash when the key turns
// loud, and a refund, a settlement and a region that stops federating read it.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { Config, ConfigInput } from '../../src/config/schema.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { matchRules } from '../../src/engine/rules.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { layoutOf, shardOfKey } from '../../src/keys.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { withScripts } from '../../src/store/commands.ts';
import { runSweepWatch, sweepCall } from '../../src/store/gossip-calls.ts';
import { scriptSource } from '../../src/store/lua-source.ts';
import { client, useRedis } from '../harness/redis.ts';
import { expectLayout3Upgrade, expectStepsAsHash, stateFields } from '../support/state-key.ts';

const server = await useRedis();
const redis = withScripts(client(server.url));

const MINUTE = 60_000;
const T0 = 1_800_000_000_000;
const peers = [{ name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' }];

let caller = 0;
const freshKey = () => `window-${++caller}-${Math.random()}`;
const request = (apiKey: string, cost = 1) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/', cost });
const configOf = (algorithm: 'fixedWindow' | 'slidingWindow', federated: boolean): Config =>
  parseConfig({
    region: 'us-east',
    ...(federated ? { federation: { leakageBudget: 0, peers } } : {}),
    rules: [{ name: 'win', by: ['apiKey'], algorithm, limit: 600, period: MINUTE }] as ConfigInput['rules'],
  });
const stateKey = (config: Config, apiKey: string) => layoutOf(config).ruleKey('win', { principal: apiKey, dimensions: [apiKey] });
const engineAt = (config: Config, now: () => number) => createRedisEngine({ config, redis, overLimitCache: false, nowMs: now });

describe.each(['fixedWindow', 'slidingWindow'] as const)('%s: a silent federated window in one string', (algorithm) => {
  const federated = configOf(algorithm, true);

  it('decides as the silent hash does, field for field, and becomes that hash when it turns loud', async () => {
    await markShardsIntact(redis);
    const asString = freshKey();
    const asHash = freshKey();
    const stringKey = stateKey(federated, asString);
    const hashKey = stateKey(federated, asHash);
    await redis.hset(hashKey, 'z', '1');
    let now = T0;
    const engine = engineAt(federated, () => now);
    // Three steps: two in one window, one in the next (a new slot beside the old one).
    const steps = [
      [T0, 3],
      [T0 + 1_500, 7],
      [T0 + MINUTE + 250, 2],
    ] as const;
    const decide = (apiKey: string, units: number) => engine.decide(request(apiKey, units));
    await expectStepsAsHash(
      redis,
      decide,
      { asString, asHash, stringKey, hashKey },
      steps,
      (at) => {
        now = at;
      },
      async () => expect(await redis.pttl(stringKey)).toBeGreaterThan(2 * MINUTE),
    );
    const [usage, hashUsage] = [await redis.memory('USAGE', stringKey), await redis.memory('USAGE', hashKey)];
    console.log(`${algorithm} silent key: string ${usage} B, hash ${hashUsage} B (MEMORY USAGE)`);
    expect(usage).toBeLessThan(hashUsage!);
    // 280 more of an allowance of 300 crosses the watermark: both turn loud, the string becomes the same hash.
    now = T0 + MINUTE + 500;
    expect(await engine.decide(request(asString, 280))).toEqual(await engine.decide(request(asHash, 280)));
    await engine.close();
    expect(await redis.type(stringKey)).toBe('hash');
    expect(await redis.hgetall(stringKey)).toEqual(await redis.hgetall(hashKey));
    expect(await redis.pttl(stringKey)).toBeGreaterThan(0);
  });

  it("an upgraded region reads the previous release's text string (layout 3) as its hash and writes layout 4", async () => {
    await markShardsIntact(redis);
    const r = topologyOf(federated).selfIndex;
    const stateKeyOf = (apiKey: string) => stateKey(federated, apiKey);
    const engineOf = (now: () => number) => engineAt(federated, now);
    await expectLayout3Upgrade(redis, { kind: 'window', r, engineAt: engineOf, request, freshKey, stateKeyOf, start: T0, period: MINUTE });
  });

  it('a refund, a settlement and a region that stops federating read the string', async () => {
    await markShardsIntact(redis);
    const engine = engineAt(federated, () => T0);
    const self = topologyOf(federated).selfIndex;
    const slot = Math.floor(T0 / MINUTE) % 3;
    const silentKey = async (cost: number) => {
      const apiKey = freshKey();
      expect((await engine.decide(request(apiKey, cost))).allowed).toBe(true);
      const key = stateKey(federated, apiKey);
      expect(await redis.type(key)).toBe('string');
      return { apiKey, key };
    };

    // A refund (another rule denied the same request on a cluster): the count comes back.
    const refunded = await silentKey(40);
    const refund = await redis.eval(
      scriptSource('refund'),
      2,
      refunded.key,
      `${refunded.key}:rf`,
      String(self),
      String(T0),
      '60000',
      algorithm === 'fixedWindow' ? 'fw' : 'sw',
      String(MINUTE),
      '40',
      'lease',
      '600',
    );
    expect(refund).toBe(1);
    expect(await redis.type(refunded.key)).toBe('hash');
    expect(await redis.hget(refunded.key, `c${slot}.${self}`)).toBeNull();

    // The fallback's settlement (admissions made while Redis was away): added to the hash the string stood for.
    const settled = await silentKey(5);
    const [matched] = matchRules(federated, request(settled.apiKey));
    await engine.settle([{ rule: matched!.rule, key: matched!.key, shard: matched!.shard, windowStart: T0 - (T0 % MINUTE), count: 4 }]);
    expect(await redis.type(settled.key)).toBe('hash');

    // The watch sweep (a watched key that expired and came back silent): read as its hash.
    const swept = await silentKey(5);
    const sweep = sweepCall(
      layoutOf(federated),
      topologyOf(federated),
      shardOfKey(swept.key),
      [{ key: swept.key, rule: federated.rules[0]! }],
      0,
      {
        now: T0,
      },
    );
    await runSweepWatch(redis, sweep);
    expect(await redis.type(swept.key)).toBe('hash');

    // The region stops federating the rule: its window path reads the hash the string stands for (as it read a
    // federated hash before: docs/operations.md), never an error.
    const left = await silentKey(5);
    await engine.close();
    const alone = configOf(algorithm, false);
    expect(stateKey(alone, left.apiKey)).toBe(left.key);
    const standalone = engineAt(alone, () => T0);
    expect((await standalone.decide(request(left.apiKey))).allowed).toBe(true);
    await standalone.close();
    expect(await redis.type(left.key)).toBe('hash');
  });
});

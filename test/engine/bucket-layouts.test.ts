// A single region's token bucket is one number (state layout 2, lua/includes/gcra.lua); a federated region's is a
// hash with its cells (layout 1's fields). Each side converts the other's where it meets it, on a real redis-server:
// an upgraded standalone region reads the hash an older release wrote, and a region that starts to federate a rule
// (decide, a peer's gossip, the watch sweep) reads the number, never more tokens than it stood for, never an error.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { matchRules } from '../../src/engine/rules.ts';
import { federationKeyView } from '../../src/federation/admin-view.ts';
import { emptySlotCells, flattenSlot } from '../../src/federation/gossip/cells.ts';
import { markAllPending } from '../../src/federation/resync.ts';
import { layoutOf, shardOfKey } from '../../src/keys.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { withScripts } from '../../src/store/commands.ts';
import { applyGossipCall, runApplyGossip, runSweepWatch, sweepCall } from '../../src/store/gossip-calls.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { client, useRedis } from '../harness/redis.ts';
import { bucketTokens, expectLayout3Upgrade, expectStepsAsHash, stateFields } from '../support/state-key.ts';
import { scriptSource } from '../../src/store/lua-source.ts';

const server = await useRedis();
const redis = withScripts(client(server.url));

const MINUTE = 60_000;
const T0 = 1_800_000_000_000;
const rule = { name: 'tb', by: ['apiKey'], algorithm: 'tokenBucket' as const, limit: 600, period: MINUTE, burst: 600 };
const bucket = { limit: 600, periodMs: MINUTE, burst: 600 };

const standalone = parseConfig({ region: 'us-east', rules: [rule] });
const federated = parseConfig({
  region: 'us-east',
  federation: { leakageBudget: 0, peers: [{ name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' }] },
  rules: [rule],
});

let caller = 0;
const freshKey = () => `layout-${++caller}-${Math.random()}`;
const request = (apiKey: string, cost = 1) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/', cost });
const stateKey = (config: Config, apiKey: string) => layoutOf(config).ruleKey('tb', { principal: apiKey, dimensions: [apiKey] });

function engineAt(config: Config, now: () => number) {
  return createRedisEngine({ config, redis, overLimitCache: false, nowMs: now });
}

/** The slot of epoch `epoch` a peer gossips: 5 admitted by region `peer` at T0, nothing else. */
function peerSlot(n: number, peer: number, epoch: number) {
  const slot = emptySlotCells(epoch, n);
  slot.c[peer] = 5;
  slot.t[peer] = T0;
  return slot;
}

/** A standalone region's state for `apiKey` after `admitted` admissions at T0: one number, 100 ms a token. */
async function spentStandalone(apiKey: string, admitted: number) {
  const engine = engineAt(standalone, () => T0);
  for (let i = 0; i < admitted; i++) expect((await engine.decide(request(apiKey))).allowed).toBe(true);
  await engine.close();
  const key = stateKey(standalone, apiKey);
  expect(await redis.get(key)).toBe(String(T0 * 1000 + admitted * 100_000));
  return key;
}

describe('token bucket state layouts', () => {
  it('an upgraded standalone region reads the hash an older release wrote, and writes one number at its first admission', async () => {
    const apiKey = freshKey();
    const key = stateKey(standalone, apiKey);
    // Layout 1: 2.5 tokens at T0 - 50 ms (half a token of refill since).
    await redis.hset(key, 'tokens', '2.5', 'last_refill', String(T0 - 50));
    const engine = engineAt(standalone, () => T0);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await engine.decide(request(apiKey))).allowed);
    expect(answers).toEqual([true, true, true, false]);
    expect(await redis.type(key)).toBe('string');
    expect(await redis.object('ENCODING', key)).toBe('int');
    // A denial of a key still in layout 1 writes nothing.
    const other = stateKey(standalone, `${apiKey}-empty`);
    await redis.hset(other, 'tokens', '0', 'last_refill', String(T0));
    expect((await engine.decide(request(`${apiKey}-empty`))).allowed).toBe(false);
    expect(await redis.hgetall(other)).toEqual({ tokens: '0', last_refill: String(T0) });
    await engine.close();
  });

  it("a region that starts to federate the rule decides from the number's tokens, as a hash from then on", async () => {
    await markShardsIntact(redis);
    const apiKey = freshKey();
    const key = await spentStandalone(apiKey, 400);
    // 200 tokens left at T0; the federated region's share is half of 600, so it holds at most 300: 200.
    const engine = engineAt(federated, () => T0);
    let admitted = 0;
    for (let i = 0; i < 250; i++) if ((await engine.decide(request(apiKey))).allowed) admitted++;
    await engine.close();
    expect(admitted).toBe(200);
    expect(await redis.type(key)).toBe('hash');
    expect(await bucketTokens(redis, key, bucket, T0)).toBeLessThan(1);
  });

  it("a peer's gossip and the watch sweep convert the number before they read the key", async () => {
    await markShardsIntact(redis);
    const topology = topologyOf(federated);
    const configured = federated.rules[0]!;
    const peer = topology.peerIndexes[0]!;
    const n = topology.regions.length;
    const epoch = Math.floor(T0 / MINUTE);

    const gossiped = await spentStandalone(freshKey(), 100);
    const slot = peerSlot(n, peer, epoch);
    const call = applyGossipCall(
      layoutOf(federated),
      topology,
      configured,
      0,
      peer,
      { k: gossiped, t: T0, s: [flattenSlot(slot)] },
      { now: T0 },
    );
    expect((await runApplyGossip(redis, call)).changed).toBe(true);
    expect(await redis.type(gossiped)).toBe('hash');
    expect(Number(await redis.hget(gossiped, `c${epoch % 3}.${peer}`))).toBe(5);
    // 500 tokens the number stood for, at most this region's share of the capacity (300) after the merge.
    expect(await bucketTokens(redis, gossiped, bucket, T0)).toBeLessThanOrEqual(500);

    const swept = await spentStandalone(freshKey(), 100);
    const layout = layoutOf(federated);
    const sweep = sweepCall(layout, topology, shardOfKey(swept), [{ key: swept, rule: configured }], 0, { now: T0 });
    await runSweepWatch(redis, sweep);
    expect(await redis.type(swept)).toBe('hash');
    expect(await bucketTokens(redis, swept, bucket, T0)).toBe(500);
  });

  it('a rule redefined as a window under the same name starts over instead of failing on the number', async () => {
    const apiKey = freshKey();
    const key = await spentStandalone(apiKey, 10);
    const window = parseConfig({
      region: 'us-east',
      rules: [{ name: 'tb', by: ['apiKey'], algorithm: 'fixedWindow', limit: 3, period: MINUTE }],
    });
    expect(stateKey(window, apiKey)).toBe(key);
    const engine = engineAt(window, () => T0);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await engine.decide(request(apiKey))).allowed);
    await engine.close();
    expect(answers).toEqual([true, true, true, false]);
    expect(await redis.type(key)).toBe('hash');
  });

  it("the admin key view shows a silent bucket's packed string as its hash", async () => {
    await markShardsIntact(redis);
    const apiKey = freshKey();
    const engine = engineAt(federated, () => T0);
    expect((await engine.decide(request(apiKey, 3))).allowed).toBe(true);
    await engine.close();
    expect((await redis.getBuffer(stateKey(federated, apiKey)))![0]).toBe(0x9d);
    const view = await federationKeyView(federated, redis, 'tb', { apiKey });
    expect(view.exists).toBe(true);
    // 300 of the share less the 3 admitted (refilled to the view's clock when that is past T0: never above the share).
    expect(view.bucket?.tokens).toBeGreaterThanOrEqual(297);
    expect(view.bucket?.tokens).toBeLessThanOrEqual(300);
  });

  it('the admin key view shows the number as the tokens it stands for', async () => {
    const apiKey = freshKey();
    // Full again 2 s from now: 20 tokens of 100 ms short of 600.
    await redis.set(stateKey(standalone, apiKey), Date.now() * 1000 + 2_000_000, 'PX', 5_000);
    const view = await federationKeyView(standalone, redis, 'tb', { apiKey });
    expect(view.exists).toBe(true);
    expect(view.bucket?.tokens).toBeGreaterThanOrEqual(580);
    expect(view.bucket?.tokens).toBeLessThan(581);
  });

  it('a silent federated bucket is one string standing for its hash, and becomes that hash when it turns loud', async () => {
    await markShardsIntact(redis);
    // The same decisions on a new key (the string) and on a key already a silent hash (z alone: the hash path).
    const asString = freshKey();
    const asHash = freshKey();
    const stringKey = stateKey(federated, asString);
    const hashKey = stateKey(federated, asHash);
    await redis.hset(hashKey, 'z', '1');
    let now = T0;
    const engine = engineAt(federated, () => now);
    const steps = [
      [T0, 3],
      [T0 + 1_500, 7],
      [T0 + MINUTE + 250, 2],
    ] as const;
    const decide = (apiKey: string, units: number) => engine.decide(request(apiKey, units));
    await expectStepsAsHash(redis, decide, { asString, asHash, stringKey, hashKey }, steps, (at) => {
      now = at;
    });
    const [usage, hashUsage] = [await redis.memory('USAGE', stringKey), await redis.memory('USAGE', hashKey)];
    console.log(`silent bucket: string ${usage} B, hash ${hashUsage} B (MEMORY USAGE)`);
    expect(usage).toBeLessThan(hashUsage!);
    // 280 more of a share of 300 crosses the watermark: both turn loud, the string becomes the very same hash.
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
    await expectLayout3Upgrade(redis, { kind: 'bucket', r, engineAt: engineOf, request, freshKey, stateKeyOf, start: T0, period: MINUTE });
  });

  it("a peer's gossip, a refund and a region that stops federating read the silent string", async () => {
    await markShardsIntact(redis);
    const topology = topologyOf(federated);
    const peer = topology.peerIndexes[0]!;
    const self = topology.selfIndex;
    const n = topology.regions.length;
    const epoch = Math.floor(T0 / MINUTE);
    const engine = engineAt(federated, () => T0);
    const silentKey = async (cost: number) => {
      const apiKey = freshKey();
      expect((await engine.decide(request(apiKey, cost))).allowed).toBe(true);
      const key = stateKey(federated, apiKey);
      expect(await redis.type(key)).toBe('string');
      return { apiKey, key };
    };

    // A peer's gossip: the hash the string stood for, with the peer's cell merged in.
    const gossiped = await silentKey(100);
    const before = await stateFields(redis, gossiped.key);
    const slot = peerSlot(n, peer, epoch);
    const call = applyGossipCall(
      layoutOf(federated),
      topology,
      federated.rules[0]!,
      0,
      peer,
      { k: gossiped.key, t: T0, s: [flattenSlot(slot)] },
      { now: T0 },
    );
    expect((await runApplyGossip(redis, call)).changed).toBe(true);
    expect(await redis.type(gossiped.key)).toBe('hash');
    const after = await redis.hgetall(gossiped.key);
    expect(after[`c${epoch % 3}.${peer}`]).toBe('5');
    expect(after[`c${epoch % 3}.${self}`]).toBe(before[`c${epoch % 3}.${self}`]);
    expect(after[`c${epoch % 3}.${self}`]).toBe('100');

    // A refund (another rule denied the same request on a cluster): the string's tokens and count come back.
    const refunded = await silentKey(40);
    const tokensBefore = await bucketTokens(redis, refunded.key, bucket, T0);
    const refund = await redis.eval(
      scriptSource('refund'),
      2,
      refunded.key,
      `${refunded.key}:rf`,
      String(self),
      String(T0),
      '60000',
      'tb',
      String(MINUTE),
      '40',
      'lease',
      '600',
    );
    expect(refund).toBe(1);
    expect(await redis.type(refunded.key)).toBe('hash');
    expect(await bucketTokens(redis, refunded.key, bucket, T0)).toBe(tokensBefore + 40);
    expect(await redis.hget(refunded.key, `c${epoch % 3}.${self}`)).toBeNull();

    // The region stops federating the rule: a standalone decision reads the string's tokens (300 − 100 = 200).
    const left = await silentKey(100);
    await engine.close();
    const alone = engineAt(standalone, () => T0);
    let admitted = 0;
    for (let i = 0; i < 210; i++) if ((await alone.decide(request(left.apiKey))).allowed) admitted++;
    await alone.close();
    expect(admitted).toBe(200);
    expect(await redis.type(left.key)).toBe('string');
    expect(await redis.object('ENCODING', left.key)).toBe('int');
  });

  it('a federated bucket rule redefined as a window under the same name reads the silent strings as their hashes', async () => {
    await markShardsIntact(redis);
    const engine = engineAt(federated, () => T0);
    const decided = freshKey();
    const settled = freshKey();
    for (const apiKey of [decided, settled]) expect((await engine.decide(request(apiKey, 10))).allowed).toBe(true);
    await engine.close();
    expect(await redis.type(stateKey(federated, decided))).toBe('string');
    const window = parseConfig({
      region: 'us-east',
      federation: { leakageBudget: 0, peers: [{ name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' }] },
      rules: [{ name: 'tb', by: ['apiKey'], algorithm: 'fixedWindow', limit: 600, period: MINUTE }],
    });
    expect(stateKey(window, decided)).toBe(stateKey(federated, decided));
    const windowed = engineAt(window, () => T0);
    // As a bucket's hash always was (docs/federation.md §7): its epoch's count read as the window's.
    const answer = await windowed.decide(request(decided));
    expect(answer.allowed).toBe(true);
    expect(await redis.type(stateKey(window, decided))).toBe('hash');
    // The fallback's settlement (admissions made while Redis was away) meets a string too.
    const [matched] = matchRules(window, request(settled));
    await windowed.settle([{ rule: matched!.rule, key: matched!.key, shard: matched!.shard, windowStart: T0 - (T0 % MINUTE), count: 4 }]);
    await windowed.close();
    expect(await redis.type(stateKey(window, settled))).toBe('hash');
  });

  it("a peer's resync marks the federated hashes pending and passes over the numbers and the silent strings", async () => {
    await redis.flushdb();
    await markShardsIntact(redis);
    await spentStandalone(freshKey(), 5);
    const engine = engineAt(federated, () => T0);
    // One admission stays silent: one string (lua/includes/silent_string.lua), nothing a peer has heard of.
    const silent = freshKey();
    expect((await engine.decide(request(silent))).allowed).toBe(true);
    expect(await redis.type(stateKey(federated, silent))).toBe('string');
    // 290 of a share of 300 crosses the watermark: the key turns loud, a hash with a version.
    const hashed = freshKey();
    expect((await engine.decide(request(hashed, 290))).allowed).toBe(true);
    await engine.close();
    const key = stateKey(federated, hashed);
    expect(await redis.type(key)).toBe('hash');
    const peer = topologyOf(federated).peerIndexes[0]!;
    expect(await markAllPending(redis, federated, peer)).toBe(1);
    expect(await redis.zscore(layoutOf(federated).peerPendingKey(shardOfKey(key), peer), key)).not.toBeNull();
  });
});

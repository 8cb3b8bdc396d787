// The watch sweep puts off a shard whose watched keys are all active holders of their idle peers' share (a hot key's
// region: each sweep there changes nothing until the holder falls quiet or the epoch ends; protocol.ts
// bucketSweepIdleUntil), and a merge that changes such a key brings the shard back at once through its bell. Real
// redis-servers; the grant is a real one (b's gossip worker applies a's fast-lane send and grants its share back).
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.ts';
import { createDirtyShards } from '../../src/federation/gossip/dirty-shards.ts';
import { createWatchSweep, sweepShards } from '../../src/federation/gossip/watch-sweep.ts';
import { federationMetrics } from '../../src/federation/metrics.ts';
import { layoutOf } from '../../src/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { withScripts } from '../../src/store/commands.ts';
import { startTestFederation, type TestFederation } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';

/** An hour's epoch: the returning span is far, the quiet span idleMs / 5 = 1 s. */
const RULES: ConfigInput['rules'] = [
  { name: 'tb', match: { endpoints: ['/tb'] }, by: ['apiKey'], algorithm: 'tokenBucket', limit: 300, period: '1h' },
];
/** Two regions share 300 + 15 (budget 5%): 157 each; 150 at once crosses a's watermark and draws b's grant. */
const LOUD_COST = 150;
const QUIET_SPAN_MS = 1_000;

describe('the watch sweep puts off an active holder of its idle peers share', () => {
  let fed: TestFederation;
  let shard = -1;
  const apiKey = 'hot-holder';
  const request = (cost: number) => ({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/tb', cost });

  beforeAll(async () => {
    fed = await startTestFederation({ names: ['a', 'b'], syncIntervalMs: 100, rules: RULES });
    const a = fed.region('a');
    const keys = layoutOf(a.config);
    expect((await a.engine.decide(request(LOUD_COST))).allowed).toBe(true);
    const key = keys.stateKeyOf('tb', { principal: apiKey, dimensions: [apiKey] });
    shard = key.shard;
    // b granted its share; a applied the grant and watches the key (it holds a peer's share).
    await eventually(
      async () => ((await a.redis.sismember(keys.watchSetKey(shard), key.key)) === 1 ? true : undefined),
      10_000,
      "a watching the key after b's grant",
    );
    // Only the sweeps this test runs from here on.
    await fed.region('a').stopFederation();
    await fed.region('b').stopFederation();
  });
  afterAll(async () => {
    await fed?.close();
  });

  it('leaves the shard out of the next rounds until then, and takes it back when its bell rings for the sweep', async () => {
    const a = fed.region('a');
    expect((await a.engine.decide(request(1))).allowed).toBe(true);
    let now = 0;
    const dirty = createDirtyShards(topologyOf(a.config).peerIndexes, () => now);
    const sweep = createWatchSweep({
      region: 'a',
      currentConfig: () => a.config,
      topology: topologyOf(a.config),
      redis: withScripts(a.redis),
      metrics: federationMetrics(new Registry()),
      logger: silentLogger(),
      dirty,
    });
    // The first sweep looks at every shard; the holder's shard is put off, not kept for the next round.
    await sweep();
    expect(dirty.take('watch')).toEqual([]);
    now += 200;
    expect(dirty.take('watch')).toEqual([]);
    // A merge that changes the key rings the shard's bell for the sweep: back at once.
    dirty.markLanes(shard, ['watch']);
    expect(dirty.take('watch')).toEqual([shard]);
    // Swept and put off again; due by the clock after the quiet span.
    dirty.keep('watch', [shard]);
    await sweep();
    expect(dirty.take('watch')).toEqual([]);
    now += QUIET_SPAN_MS;
    expect(dirty.take('watch')).toEqual([shard]);
  });

  it('answers how long the sweep changes nothing there, and sweeps as before once the holder is quiet', async () => {
    const a = fed.region('a');
    const topology = topologyOf(a.config);
    const redis = withScripts(a.redis);
    expect((await a.engine.decide(request(1))).allowed).toBe(true);
    const busy = await sweepShards(redis, a.config, topology, [shard]);
    expect(busy.rebalanced).toBe(0);
    expect(busy.watched).toHaveLength(1);
    expect(busy.watched[0]!.shard).toBe(shard);
    expect(busy.watched[0]!.quietForMs).toBeGreaterThan(QUIET_SPAN_MS / 2);
    expect(busy.watched[0]!.quietForMs).toBeLessThanOrEqual(QUIET_SPAN_MS);

    // Quiet for longer than the span: the sweep goes the whole way (and returns b's share), nothing put off.
    await new Promise((resolve) => setTimeout(resolve, busy.watched[0]!.quietForMs + 50));
    const quiet = await sweepShards(redis, a.config, topology, [shard]);
    expect(quiet.rebalanced).toBe(1);
    expect(quiet.watched.every((entry) => entry.quietForMs === 0)).toBe(true);
  });
});

// A key goes to a peer once when both lanes of the publisher want it at the same time (in-flight.ts): a loud first
// admission is on the fast lane and pending for the peer, and the fast lane and a sync round run together. Real
// redis-servers and the peer's real BullMQ queue; the federations of both regions are stopped so that only the
// publisher built here sends, and nothing consumes the peer's queue.
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.ts';
import { createDirtyShards, type DirtyShards } from '../../src/federation/gossip/dirty-shards.ts';
import { createInFlight } from '../../src/federation/gossip/in-flight.ts';
import { readJob } from '../../src/federation/gossip/message.ts';
import { createPeerLink, GOSSIP_QUEUE, type PeerLink } from '../../src/federation/gossip/peer-link.ts';
import { createPublisher, type Publisher } from '../../src/federation/gossip/publisher.ts';
import { peerTargets } from '../../src/federation/gossip/connections.ts';
import { federationMetrics } from '../../src/federation/metrics.ts';
import { createPeerBook } from '../../src/federation/peers.ts';
import { KEY_SHARDS, layoutOf, shardOfKey } from '../../src/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { withScripts } from '../../src/store/commands.ts';
import { startTestFederation, type TestFederation } from '../support/federation.ts';
import { awayFromWindowEdge } from '../service/fixtures.ts';
import { eventually } from '../support/wait.ts';

/** Two regions share 300 + 15 (budget 5%): 157 each, and 150 at once crosses a's watermark (idle-wake.test.ts). */
const LOUD_COST = 150;
const PERIOD_MS = 3_600_000;
const RULES: ConfigInput['rules'] = [
  { name: 'fw', match: { endpoints: ['/fw'] }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 300, period: '1h' },
];

describe('a key both lanes want at once', () => {
  let fed: TestFederation;
  let local: Redis;
  let links: PeerLink[];
  let publisher: Publisher;
  let peerQueue: Queue;
  let dirty: DirtyShards;
  beforeAll(async () => {
    fed = await startTestFederation({ names: ['a', 'b'], syncIntervalMs: 60_000, rules: RULES });
    const [a, b] = [fed.region('a'), fed.region('b')];
    await a.stopFederation();
    await b.stopFederation();
    const config = a.config;
    const topology = topologyOf(config);
    const keys = layoutOf(config);
    const logger = silentLogger();
    const metrics = federationMetrics(new Registry());
    const peerList = peerTargets(config).map((peer) => ({ ...peer, index: topology.regions.indexOf(peer.name) }));
    local = new Redis(a.server.url);
    dirty = createDirtyShards(topology.peerIndexes);
    links = peerList.map((peer) => createPeerLink(peer, 2_000, logger, keys));
    publisher = createPublisher({
      config,
      topology,
      redis: withScripts(local),
      links,
      metrics,
      peers: createPeerBook(config.region, peerList, metrics, logger),
      logger,
      addTimeoutMs: 2_000,
      heartbeatMs: 60_000,
      dirty,
    });
    peerQueue = new Queue(GOSSIP_QUEUE, { connection: b.redis.duplicate(), prefix: layoutOf(b.config).gossipQueuePrefix });
    // The link's client connects (b's meta is there since its federation ran), then nothing is left to send.
    await eventually(async () => (await links[0]!.fingerprint()) ?? undefined, 5_000, "b's Redis through the link");
    await publisher.round(true);
    await publisher.fastRound();
  });
  afterAll(async () => {
    await peerQueue?.close();
    await Promise.all((links ?? []).map((link) => link.close()));
    local?.disconnect();
    await fed?.close();
  });

  /** How many entries for `key` the peer's queue holds, over every job added to it. */
  const entriesFor = async (key: string): Promise<number> => {
    const jobs = await peerQueue.getJobs(['waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized']);
    return jobs.flatMap((job) => readJob(job.data, 2).entries).filter((entry) => entry.k === key).length;
  };

  for (const order of ['fast lane first', 'sync round first'] as const) {
    it(`goes to the peer once (${order}), and is forgotten in the peer's pending set`, async () => {
      const a = fed.region('a');
      await awayFromWindowEdge(PERIOD_MS, 10_000);
      const apiKey = `once-${order.split(' ')[0]}-${Math.random().toString(36).slice(2)}`;
      expect((await a.engine.decide({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/fw', cost: LOUD_COST })).allowed).toBe(true);
      const keys = layoutOf(a.config);
      const pendingSets = Array.from({ length: KEY_SHARDS }, (_, shard) => keys.peerPendingKey(shard, 1));
      const fastSets = Array.from({ length: KEY_SHARDS }, (_, shard) => keys.fastSetKey(shard));
      // The admission put its key on both lanes: pending for b and in a fast-lane set.
      const pending = (await Promise.all(pendingSets.map((set) => a.redis.zrange(set, '0', '-1')))).flat();
      expect(pending).toHaveLength(1);
      expect(await a.redis.exists(...fastSets)).toBe(1);
      const key = pending[0]!;
      // Its shard's bell rang: what the publisher's bell waiter marks (bells.ts).
      dirty.mark(shardOfKey(key));

      // A forced round (as flush() runs it): a timed one may leave out a peer the fast lane has just flushed.
      const lanes =
        order === 'fast lane first' ? [publisher.fastRound(), publisher.round(true)] : [publisher.round(true), publisher.fastRound()];
      await Promise.all(lanes);

      expect(await entriesFor(key)).toBe(1);
      expect(await a.redis.exists(...pendingSets)).toBe(0);
      expect(await a.redis.exists(...fastSets)).toBe(0);
    });
  }

  it("carries the peer's pending keys with a fast-lane send, and the next timed round leaves that peer out", async () => {
    const a = fed.region('a');
    await awayFromWindowEdge(PERIOD_MS, 10_000);
    const keys = layoutOf(a.config);
    const pendingSets = Array.from({ length: KEY_SHARDS }, (_, shard) => keys.peerPendingKey(shard, 1));
    const fastSets = Array.from({ length: KEY_SHARDS }, (_, shard) => keys.fastSetKey(shard));
    const decide = async (apiKey: string, cost: number) =>
      expect((await a.engine.decide({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/fw', cost })).allowed).toBe(true);
    const pendingKeys = async () => (await Promise.all(pendingSets.map((set) => a.redis.zrange(set, '0', '-1')))).flat();
    const jobsSoFar = async () => (await peerQueue.getJobs(['waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized'])).length;
    const suffix = Math.random().toString(36).slice(2);

    // First: a key loud already and sent, then an admission at a report step (3 of a 157 share: 150 → 153), which
    // is pending for b and on no fast lane: the next round's business.
    await decide(`rides-${suffix}`, LOUD_COST);
    for (const shard of Array.from({ length: KEY_SHARDS }, (_, s) => s)) dirty.mark(shard);
    await publisher.fastRound();
    expect(await pendingKeys()).toHaveLength(0);
    await decide(`rides-${suffix}`, 3);
    const [rider] = await pendingKeys();
    expect(rider).toBeDefined();
    expect(await a.redis.exists(...fastSets)).toBe(0);

    // Another key turns loud: the fast lane sends it and the pending one together, in one job.
    await decide(`turns-${suffix}`, LOUD_COST);
    const [turned] = (await pendingKeys()).filter((key) => key !== rider);
    expect(turned).toBeDefined();
    dirty.mark(shardOfKey(turned!));
    dirty.mark(shardOfKey(rider!));
    const before = await jobsSoFar();
    await publisher.fastRound();
    expect(await jobsSoFar()).toBe(before + 1);
    expect(await entriesFor(turned!)).toBe(1);
    expect(await entriesFor(rider!)).toBe(2);
    expect(await pendingKeys()).toHaveLength(0);

    // Pending again at the next report step: the timed round leaves b out (flushed less than an interval ago), a
    // forced round (flush()) sends it.
    await decide(`rides-${suffix}`, 3);
    dirty.mark(shardOfKey(rider!));
    await publisher.round();
    expect(await jobsSoFar()).toBe(before + 1);
    expect(await pendingKeys()).toEqual([rider]);
    await publisher.round(true);
    expect(await jobsSoFar()).toBe(before + 2);
    expect(await entriesFor(rider!)).toBe(3);
    expect(await pendingKeys()).toHaveLength(0);
  });
});

describe('createInFlight', () => {
  it('lets one lane hold a key per peer, and a release drops only its own claim', () => {
    const inFlight = createInFlight();
    expect(inFlight.claim(1, 'k', 7)).toBe(true);
    // The same version, or an older one, is in flight already; another peer is another claim.
    expect(inFlight.claim(1, 'k', 7)).toBe(false);
    expect(inFlight.claim(1, 'k', 6)).toBe(false);
    expect(inFlight.claim(2, 'k', 7)).toBe(true);
    // A newer version goes too (the peer does not have it), and the older claim's release leaves it in place.
    expect(inFlight.claim(1, 'k', 8)).toBe(true);
    inFlight.release(1, 'k', 7);
    expect(inFlight.claim(1, 'k', 8)).toBe(false);
    inFlight.release(1, 'k', 8);
    expect(inFlight.claim(1, 'k', 8)).toBe(true);
  });
});

// 5. Gossip cost per sync interval against active keys. The real publisher (src/federation/gossip/publisher.ts)
// runs its rounds against this region's Redis and adds BullMQ jobs to two peer redis-servers started here.
// Each case touches K keys r times (one sync interval's traffic), then publishes until the pending sets are
// empty, counting round trips and bytes on every Redis. Same keys with 10x the requests must cost the same.
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { Registry } from 'prom-client';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import { withScripts } from '../../src/store/commands.ts';
import { createPeerLink, type PeerLink } from '../../src/federation/gossip/peer-link.ts';
import { createPublisher } from '../../src/federation/gossip/publisher.ts';
import { federationMetrics } from '../../src/federation/metrics.ts';
import { createPeerBook } from '../../src/federation/peers.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { KEY_SHARDS, keyLayout, peerPendingKey } from '../../src/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { startRedis } from '../../src/ops/redis-process.ts';
import { apiKeyRequest, benchConfig, newClient, type Section } from '../lib/context.ts';
import { runCountOrThrow } from '../lib/load.ts';
import { progress } from '../lib/progress.ts';
import { callsDelta, commandCalls, netBytes, totalCalls } from '../lib/redis-stats.ts';
import { round } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';

const MAX_BATCH_KEYS = 5_000;

export const gossipSection: Section = async (ctx) => {
  const peersRedis = await Promise.all([startRedis(), startRedis()]);
  const peerAdmins = peersRedis.map((server) => newClient(server.url));
  const cases: [number, number][] = ctx.options.quick
    ? [
        [1_000, 1],
        [1_000, 10],
        [10_000, 1],
      ]
    : [
        [1_000, 1],
        [1_000, 10],
        [10_000, 1],
        [100_000, 1],
      ];
  const rows: Row[] = [];
  try {
    for (const [keys, perKey] of cases) {
      await ctx.admin.flushall();
      await Promise.all(peerAdmins.map((admin) => admin.flushall()));
      const config = benchConfig(
        ctx.redisServer.url,
        [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000, period: '1m' }],
        {
          region: 'us-east',
          federation: {
            maxBatchKeys: MAX_BATCH_KEYS,
            peers: [
              { name: 'eu-west', redisUrl: peersRedis[0]!.url },
              { name: 'ap-south', redisUrl: peersRedis[1]!.url },
            ],
          },
        },
      );
      const topology = topologyOf(config);
      // A serving region has its shard markers; without them the first decision per shard fences the window.
      await markShardsIntact(ctx.admin);

      const redis = createRegionRedis(config);
      await waitReady(redis);
      const engine = createRedisEngine({ config, redis, overLimitCache: false });
      const decisions = keys * perKey;
      progress(
        `gossip: ${keys.toLocaleString('en-US')} active keys x ${perKey} request(s): ${decisions.toLocaleString('en-US')} decisions`,
      );
      await runCountOrThrow(
        'gossip: decisions',
        (i) => engine.decide(apiKeyRequest(`g-${i % keys}`)),
        decisions,
        256,
        (done) => progress(`gossip: ${done.toLocaleString('en-US')} / ${decisions.toLocaleString('en-US')} decisions`),
      );
      await engine.close();

      const metrics = federationMetrics(new Registry());
      const peerList = config.federation.peers.map((peer) => ({ ...peer, index: topology.regions.indexOf(peer.name) }));
      const peers = createPeerBook(config.region, peerList, metrics, silentLogger());
      const links: PeerLink[] = peerList.map((peer) => createPeerLink(peer, 5_000, silentLogger(), keyLayout()));
      // The link's client connects on its own; wait until both are ready so the first round is not a failed add.
      await Promise.all(peerAdmins.map((admin) => admin.ping()));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const local = withScripts(redis);
      const publisher = createPublisher({
        config,
        topology,
        redis: local,
        links,
        metrics,
        peers,
        logger: silentLogger(),
        addTimeoutMs: 10_000,
        heartbeatMs: 60_000,
      });

      const backlog = async () => {
        let total = 0;
        for (const peer of topology.peerIndexes)
          for (let shard = 0; shard < KEY_SHARDS; shard++) total += await ctx.admin.zcard(peerPendingKey(shard, peer));
        return total;
      };
      const pendingBefore = await backlog();
      const beforeCalls = await commandCalls(ctx.admin);
      const beforeNet = await netBytes(ctx.admin);
      const peerNetBefore = await Promise.all(peerAdmins.map((admin) => netBytes(admin)));
      let rounds = 0;
      const started = performance.now();
      // Bounded: each round drains up to MAX_BATCH_KEYS per peer.
      const maxRounds = Math.ceil(keys / MAX_BATCH_KEYS) + 3;
      for (; rounds < maxRounds; ) {
        await publisher.round();
        rounds++;
        if ((await backlog()) === 0) break;
      }
      const publishMs = performance.now() - started;
      const afterNet = await netBytes(ctx.admin);
      const delta = callsDelta(beforeCalls, await commandCalls(ctx.admin));
      const peerNetAfter = await Promise.all(peerAdmins.map((admin) => netBytes(admin)));
      const left = await backlog();
      await Promise.all(links.map((link) => link.close()));
      await redis.quit();

      // The bench's own ZCARD polling of the backlog is not the publisher's: take it out.
      const ownPolls = rounds * topology.peerIndexes.length * KEY_SHARDS;
      const zcard = (delta.zcard ?? 0) - ownPolls;
      const scripts = (delta.evalsha ?? 0) + (delta.eval ?? 0);
      const roundTrips = scripts + Math.max(0, zcard);
      const toPeers = peerNetAfter.reduce((sum, after, i) => sum + after.input - peerNetBefore[i]!.input, 0);
      const originOut = afterNet.output - beforeNet.output;
      const row: Row = {
        'active keys': keys,
        'requests/key': perKey,
        decisions,
        'pending entries': pendingBefore,
        rounds,
        'origin round trips': roundTrips,
        'take+ack scripts': scripts,
        'in-script calls': totalCalls(delta) - (delta.zcard ?? 0) - scripts,
        'origin bytes out': originOut,
        'bytes to peers': toPeers,
        'bytes to peers / key': round(toPeers / keys, 1),
        'publish ms': Math.round(publishMs),
        'left pending': left,
      };
      ctx.figures[`gossip.k${keys}.r${perKey}.bytesToPeers`] = toPeers;
      ctx.figures[`gossip.k${keys}.r${perKey}.roundTrips`] = roundTrips;
      rows.push(row);
    }
  } finally {
    await Promise.all(peerAdmins.map((admin) => admin.quit().catch(() => admin.disconnect())));
    await Promise.all(peersRedis.map((server) => server.stop()));
  }
  const same = (k: number) => {
    const one = ctx.figures[`gossip.k${k}.r1.bytesToPeers`];
    const ten = ctx.figures[`gossip.k${k}.r10.bytesToPeers`];
    return one && ten
      ? `${k.toLocaleString('en-US')} keys: 10x requests -> ${round(ten / one)}x bytes, ` +
          `${round(ctx.figures[`gossip.k${k}.r10.roundTrips`]! / ctx.figures[`gossip.k${k}.r1.roundTrips`]!)}x round trips`
      : undefined;
  };
  await ctx.admin.flushall();
  return [
    {
      id: 'gossip',
      title: '5. Gossip cost of one sync interval vs active keys (three regions, real publisher, two peer Redis servers)',
      columns: [
        'active keys',
        'requests/key',
        'decisions',
        'pending entries',
        'rounds',
        'origin round trips',
        'take+ack scripts',
        'in-script calls',
        'origin bytes out',
        'bytes to peers',
        'bytes to peers / key',
        'publish ms',
        'left pending',
      ],
      rows,
      notes: [
        `Publisher rounds with maxBatchKeys ${MAX_BATCH_KEYS} until the pending sets are empty (one round per sync interval in service; ` +
          `more keys than a batch take several intervals). Round trips on the origin: 64 ZCARDs per peer per round (backlog sample) plus ` +
          `take_pending/ack_pending scripts. Bytes to peers: BullMQ job adds, measured as the peers' total_net_input_bytes.`,
        ...[1_000, 10_000].map(same).filter((line): line is string => line !== undefined),
      ],
    },
  ];
};

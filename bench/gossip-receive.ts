// `npx tsx bench/gossip-receive.ts [seconds]`: what a receiving region pays per gossip job, by job rate and entries
// per job (RECEIVE_CASES='25x1,25x8': jobs a second x entries a job; RECEIVE_COMMANDS=1 also lists its Redis's
// commands per job by name). One real service process (eu-west, bench/http/server.ts) applies the jobs a real publisher (us-east, in this
// process: src/federation/gossip/publisher.ts over its own redis-server) sends it each round; ap-south is a
// redis-server only (it receives the same jobs, nobody applies them). Each round first turns `entries` fresh keys loud
// on us-east (one admission of the key's whole share: the fast-lane and pending marks a key crossing its watermark
// makes), then runs one publisher round, `rate` rounds a second. The token bucket of 30 a minute gives each region a
// share of 10, so one decision of cost 9 crosses the watermark. Printed per case, beside an idle baseline of the same
// length: eu-west's service and Redis CPU per job above idle, its Redis commands per job (INFO commandstats), and its
// service's wake-ups and write system calls per job. eu-west, an idle donor, grants each key it hears of back to
// us-east, as the Zipf row's peers do: a job's cost includes the grant it sets off (fast lane, BullMQ add to us-east,
// sync-round counts). What the Zipf row of the federation section pays on both peers for every job (docs/performance.md,
// eighteenth pass). Run alone.
import { Registry } from 'prom-client';
import type { ConfigInput } from '../src/config/schema.ts';
import { createRedisEngine } from '../src/engine/redis-engine.ts';
import { createPeerLink, GOSSIP_QUEUE, type PeerLink } from '../src/federation/gossip/peer-link.ts';
import { createPublisher } from '../src/federation/gossip/publisher.ts';
import { federationMetrics } from '../src/federation/metrics.ts';
import { createPeerBook } from '../src/federation/peers.ts';
import { markShardsIntact } from '../src/federation/recovery.ts';
import { keyLayout } from '../src/keys.ts';
import { silentLogger } from '../src/log.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { topologyOf } from '../src/protocol/index.ts';
import { createRegionRedis, waitReady } from '../src/store/client.ts';
import { withScripts } from '../src/store/commands.ts';
import { apiKeyRequest, benchConfig, newClient } from './lib/context.ts';
import { processCpuMicros, startServer } from './lib/processes.ts';
import { callsDelta, commandCalls, totalCalls } from './lib/redis-stats.ts';
import { renderTable, type Row } from './lib/table.ts';

const seconds = Number(process.argv[2] ?? 6);
/** [publisher rounds a second (jobs a second to each peer), keys turned loud per round (entries per job)]. */
const CASES: readonly [number, number][] = process.env.RECEIVE_CASES
  ? process.env.RECEIVE_CASES.split(',').map((text) => text.split('x').map(Number) as [number, number])
  : [
      [5, 1],
      [10, 1],
      [10, 8],
      [25, 1],
      [25, 8],
      [50, 8],
    ];
const RULE: NonNullable<ConfigInput['rules']>[number] = {
  name: 'per-key',
  match: { identity: 'apiKey' },
  by: ['apiKey'],
  algorithm: 'tokenBucket',
  limit: 30,
  period: '1m',
};
// A region's share is 9.99999 tokens (30 / 3, no budget part at 5% of 30): an admission of 9 is past the 90% watermark.
const SHARE_COST = 9;

const [origin, receiver, bystander] = await Promise.all([startRedis(), startRedis(), startRedis()]);
const federation = (peers: { name: string; redisUrl: string }[]) => ({ syncIntervalMs: 100, leakageBudget: '5%', bootstrap: 'new', peers });
const receiverConfig: Omit<ConfigInput, 'redis'> = {
  region: 'eu-west',
  rules: [RULE],
  federation: federation([
    { name: 'us-east', redisUrl: origin.url },
    { name: 'ap-south', redisUrl: bystander.url },
  ]) as ConfigInput['federation'],
};
const service = await startServer('service', { redisUrl: receiver.url, config: receiverConfig });
const config = benchConfig(origin.url, [RULE], {
  region: 'us-east',
  federation: federation([
    { name: 'eu-west', redisUrl: receiver.url },
    { name: 'ap-south', redisUrl: bystander.url },
  ]) as ConfigInput['federation'],
});
const topology = topologyOf(config);
const originAdmin = newClient(origin.url);
const receiverAdmin = newClient(receiver.url);
await markShardsIntact(originAdmin);
const redis = createRegionRedis(config);
await waitReady(redis);
const engine = createRedisEngine({ config, redis, overLimitCache: false });
const registry = new Registry();
const metrics = federationMetrics(registry);
const peerList = config.federation.peers.map((peer) => ({ ...peer, index: topology.regions.indexOf(peer.name) }));
const links: PeerLink[] = peerList.map((peer) => createPeerLink(peer, 5_000, silentLogger(), keyLayout()));
const publisher = createPublisher({
  config,
  topology,
  redis: withScripts(redis),
  links,
  metrics,
  peers: createPeerBook(config.region, peerList, metrics, silentLogger()),
  logger: silentLogger(),
  addTimeoutMs: 10_000,
  heartbeatMs: 60_000,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Reading {
  service: number;
  redis: number;
  commands: Awaited<ReturnType<typeof commandCalls>>;
  wakeups: number;
  writes: number;
  /** Jobs the publisher sent eu-west so far (its quotafed_federation_batches_total). */
  sent: number;
}
const queueKey = (list: string) => `${keyLayout().gossipQueuePrefix}:${GOSSIP_QUEUE}:${list}`;
const sentSoFar = async (): Promise<number> => {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'quotafed_federation_batches_total');
  return (
    metric?.values.filter((v) => v.labels.direction === 'sent' && v.labels.peer === 'eu-west').reduce((sum, v) => sum + v.value, 0) ?? 0
  );
};
const read = async (): Promise<Reading> => {
  const io = service.io();
  return {
    commands: await commandCalls(receiverAdmin),
    sent: await sentSoFar(),
    service: service.cpuMicros() ?? Number.NaN,
    redis: processCpuMicros(receiver.pid) ?? Number.NaN,
    wakeups: io?.wakeups ?? Number.NaN,
    writes: io?.writes ?? Number.NaN,
  };
};
/** Waits until the receiver has taken and finished every job sent (at most 10 s). */
const settle = async () => {
  for (let i = 0; i < 100; i++) {
    const [waiting, active] = await Promise.all([receiverAdmin.llen(queueKey('wait')), receiverAdmin.llen(queueKey('active'))]);
    if (waiting + active === 0) return;
    await sleep(100);
  }
};

// Warm-up: the receiver's job path run a few hundred times first, as a serving region's is.
let serial = 0;
const turnLoud = async (count: number) => {
  await Promise.all(Array.from({ length: count }, () => engine.decide({ ...apiKeyRequest(`r-${serial++}`), cost: SHARE_COST })));
};
for (let i = 0; i < 300; i++) {
  await turnLoud(2);
  await publisher.round();
}
await settle();
await sleep(1_000);

const idleBefore = await read();
await sleep(seconds * 1_000);
const idleAfter = await read();
const idlePerSecond = {
  service: (idleAfter.service - idleBefore.service) / seconds,
  redis: (idleAfter.redis - idleBefore.redis) / seconds,
};

const rows: Row[] = [];
for (const [rate, entries] of CASES) {
  const before = await read();
  const started = performance.now();
  for (let round = 0; round < rate * seconds; round++) {
    const due = started + (round * 1_000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    await turnLoud(entries);
    await publisher.round();
  }
  await settle();
  const elapsed = (performance.now() - started) / 1_000;
  const after = await read();
  const jobs = after.sent - before.sent;
  const perJob = (value: number) => (jobs > 0 ? value / jobs : Number.NaN);
  rows.push({
    'jobs/s': rate,
    'entries/job': entries,
    'jobs applied': jobs,
    'service µs/job above idle': perJob(after.service - before.service - idlePerSecond.service * elapsed),
    'Redis µs/job above idle': perJob(after.redis - before.redis - idlePerSecond.redis * elapsed),
    'Redis commands/job': perJob(totalCalls(callsDelta(before.commands, after.commands))),
    'wake-ups/job': perJob(after.wakeups - before.wakeups),
    'write syscalls/job': perJob(after.writes - before.writes),
  });
  console.error(`gossip-receive: ${rate} jobs/s x ${entries} entries done (${jobs} jobs)`);
  if (process.env.RECEIVE_COMMANDS) {
    const delta = callsDelta(before.commands, after.commands);
    console.error(
      Object.entries(delta)
        .sort((x, y) => y[1] - x[1])
        .slice(0, 30)
        .map(([name, count]) => `${name} ${(count / jobs).toFixed(2)}`)
        .join(', '),
    );
  }
}
console.log(
  renderTable({
    id: 'gossip-receive',
    title: `A receiving region's cost per gossip job (${seconds} s per case; idle: service ${(idlePerSecond.service / 1000).toFixed(1)} ms/s, Redis ${(idlePerSecond.redis / 1000).toFixed(1)} ms/s)`,
    columns: [
      'jobs/s',
      'entries/job',
      'jobs applied',
      'service µs/job above idle',
      'Redis µs/job above idle',
      'Redis commands/job',
      'wake-ups/job',
      'write syscalls/job',
    ],
    rows,
  }),
);

await engine.close();
await Promise.all(links.map((link) => link.close()));
await redis.quit();
await originAdmin.quit();
await receiverAdmin.quit();
await service.stop();
await Promise.all([origin.stop(), receiver.stop(), bystander.stop()]);

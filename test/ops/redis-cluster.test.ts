// The regional Redis can be a Redis Cluster: six real redis-server processes (three primaries, three
// replicas) joined with redis-cli. Checks the things quotafed relies on: hash-tagged keys share a slot so one
// Lua script can touch them all, BullMQ runs under the {qf} prefix, and writes resume after a primary dies.
import { Queue, Worker } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GOSSIP_QUEUE_PREFIX, ruleKey, shardOf, shardTag } from '../../src/keys.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';

let cluster: RedisCluster;
const clients: Cluster[] = [];

function connect(extra: ConstructorParameters<typeof Cluster>[1] = {}): Cluster {
  const client = new Cluster([...cluster.seedNodes], { ...extra });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

beforeAll(async () => {
  cluster = await startRedisCluster();
});

afterAll(async () => {
  await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())));
  await cluster?.stop();
});

describe('redis cluster harness', () => {
  it('starts three primaries with one replica each', async () => {
    const nodes = await cluster.topology();
    expect(nodes.filter((node) => node.role === 'primary')).toHaveLength(3);
    const replicas = nodes.filter((node) => node.role === 'replica');
    expect(replicas).toHaveLength(3);
    expect(new Set(replicas.map((node) => node.primaryId)).size).toBe(3);
    expect(cluster.seedUrls).toHaveLength(6);
  });

  it('keeps every key with the same hash tag in one slot, so one Lua call can touch them all', async () => {
    const redis = connect();
    const tag = '{s12}';
    const keys = [`qf:${tag}:per-key:a`, `qf:${tag}:search:b`, `qf:${tag}:checkout:c`, `qf:${tag}:dirty`];
    const slots = await Promise.all(keys.map((key) => redis.call('CLUSTER', 'KEYSLOT', key)));
    expect(new Set(slots).size).toBe(1);

    // A script that increments every key it is given and returns the new values: it would fail with
    // CROSSSLOT if any key lived in another slot.
    const script = "local out = {} for i, key in ipairs(KEYS) do out[i] = redis.call('INCRBY', key, ARGV[1]) end return out";
    expect(await redis.eval(script, keys.length, ...keys, 3)).toEqual([3, 3, 3, 3]);
    expect(await redis.eval(script, keys.length, ...keys, 2)).toEqual([5, 5, 5, 5]);

    // Without a shared tag the same script is refused: the tag is what makes it work.
    await expect(redis.eval(script, 2, 'qf:{s1}:x', 'qf:{s2}:x', 1)).rejects.toThrow(/CROSSSLOT/);
  });

  it('puts all rule keys of one principal in one slot through src/keys.ts', async () => {
    const redis = connect();
    const principal = 'sk_live_{weird}:key';
    const keys = [
      ruleKey('per-key', { principal, dimensions: [principal] }),
      ruleKey('search', { principal, dimensions: [principal, '/search'] }),
      ruleKey('checkout', { principal, dimensions: [principal, '/checkout'] }),
    ];
    expect(keys.every((key) => key.includes(shardTag(shardOf(principal))))).toBe(true);
    const slots = await Promise.all(keys.map((key) => redis.call('CLUSTER', 'KEYSLOT', key)));
    expect(new Set(slots).size).toBe(1);
  });

  it('runs a BullMQ queue and worker with the {qf} prefix', async () => {
    expect(GOSSIP_QUEUE_PREFIX).toBe('{qf}');
    const connection = connect({ redisOptions: { maxRetriesPerRequest: null } });
    const queue = new Queue('gossip-test', { connection, prefix: GOSSIP_QUEUE_PREFIX });
    const seen: number[] = [];
    const done = new Promise<void>((resolve) => {
      const worker = new Worker(
        'gossip-test',
        async (job) => {
          seen.push(job.data.n as number);
          if (seen.length === 5) resolve();
          return job.data.n * 2;
        },
        { connection: connect({ redisOptions: { maxRetriesPerRequest: null } }), prefix: GOSSIP_QUEUE_PREFIX, drainDelay: 1 },
      );
      afterAll(() => worker.close());
    });
    for (let n = 1; n <= 5; n += 1) await queue.add('batch', { n }, { removeOnComplete: true });
    await done;
    expect(seen.sort()).toEqual([1, 2, 3, 4, 5]);
    // Every key BullMQ made lives under the tag, so a Lua script of the queue never crosses slots.
    const keyslots = new Set<unknown>();
    for (const node of connection.nodes('master')) {
      const keys = await node.keys('{qf}:gossip-test:*');
      for (const key of keys) keyslots.add(await node.call('CLUSTER', 'KEYSLOT', key));
    }
    expect(keyslots.size).toBe(1);
    await queue.close();
  });

  it('accepts writes again within a bounded time after one primary fails over', async () => {
    const redis = connect({ retryDelayOnFailover: 100, retryDelayOnClusterDown: 100, redisOptions: { commandTimeout: 1_000 } });
    const key = 'qf:{s12}:failover';
    const survivor = 'qf:{s12}:survivor';
    await redis.set(survivor, 'kept');
    const primary = await cluster.primaryPortFor(key);
    // Replication is asynchronous: wait until the replica has the write, so the failover must keep it.
    const direct = new Redis({ host: '127.0.0.1', port: primary, maxRetriesPerRequest: 0 });
    expect(await direct.call('WAIT', '1', '5000')).toBe(1);
    direct.disconnect();

    const result = await cluster.failover(primary);
    expect(result.promotedPort).not.toBe(primary);
    expect(await cluster.primaryPortFor(key)).toBe(result.promotedPort);

    // The client learns the new owner through MOVED / a slots refresh; bound the wait, count the attempts.
    const deadline = Date.now() + 15_000;
    let written = false;
    while (!written && Date.now() < deadline) {
      written = await redis.set(key, 'after').then(
        () => true,
        () => false,
      );
      if (!written) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(written).toBe(true);
    expect(await redis.get(key)).toBe('after');
    const fresh = connect();
    expect(await fresh.get(survivor)).toBe('kept');

    // The old primary comes back as a replica of the node that took over, restoring redundancy.
    await cluster.restartNode(primary);
    const nodes = await cluster.topology();
    const promoted = nodes.find((node) => node.port === result.promotedPort)!;
    expect(nodes.find((node) => node.port === primary)).toMatchObject({ role: 'replica', primaryId: promoted.id, failed: false });
  });
});

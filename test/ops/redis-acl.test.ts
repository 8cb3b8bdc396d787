// The Redis ACLs docs/operations.md recommends are enough to run quotafed and no more: the regional user runs
// the real decision scripts and the gossip worker; the peer user can only add gossip jobs; neither can read
// other keys or run admin commands.
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startDemoUpstream } from '../../src/demo/upstream.ts';
import { GOSSIP_QUEUE_PREFIX } from '../../src/keys.ts';
import { startRegionService } from '../../src/service.ts';
import { client, useRedis } from '../harness/redis.ts';

// Keep in step with docs/operations.md, "Redis ACL users".
const REGIONAL_ACL =
  'on >regional-password-1234 resetkeys ~qf:* ~{qf}:* resetchannels &{qf}:* -@all +@read +@write +@scripting +@connection +@transaction ' +
  '+@pubsub -@dangerous +info +time +client|setname +client|getname +client|id';
const PEER_ACL =
  'on >peer-password-1234 resetkeys ~{qf}:* resetchannels &{qf}:* -@all +@read +@write +@scripting +@connection +@transaction ' +
  '-@dangerous +info +client|setname +client|getname';

describe('recommended Redis ACL users', async () => {
  const server = await useRedis();
  const admin = client(server.url);
  await admin.call('ACL', 'SETUSER', 'quotafed', ...REGIONAL_ACL.split(' '));
  await admin.call('ACL', 'SETUSER', 'quotafed-peer', ...PEER_ACL.split(' '));
  const regionalUrl = `redis://quotafed:regional-password-1234@127.0.0.1:${server.port}`;
  const peerUrl = `redis://quotafed-peer:peer-password-1234@127.0.0.1:${server.port}`;
  const closers: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  });

  it('lets the regional user run the real decision scripts through the service', async () => {
    const upstream = await startDemoUpstream({ port: 0 });
    closers.push(() => upstream.close());
    const config = parseConfig({
      region: 'solo',
      port: 0,
      redis: { url: regionalUrl, commandTimeoutMs: 1_000 },
      upstream: { url: upstream.url },
      logLevel: 'silent',
      rules: [
        { name: 'per-key', match: { identity: 'apiKey' }, algorithm: 'tokenBucket', limit: 100, period: '1m', failMode: 'closed' },
        {
          name: 'orders',
          match: { identity: 'apiKey', endpoints: ['/orders'] },
          by: ['apiKey', 'endpoint'],
          algorithm: 'fixedWindow',
          limit: 3,
          period: '1m',
          failMode: 'closed',
        },
      ],
    });
    const service = await startRegionService(config);
    closers.push(() => service.close());
    const statuses: number[] = [];
    for (let i = 0; i < 4; i += 1) {
      const response = await fetch(`${service.url}/orders`, { headers: { 'X-API-Key': 'acl-test' } });
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    // Fail-closed rules: a NOPERM would have shown up as 429 from the first request (or a 5xx), not 200,200,200.
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(await admin.call('ACL', 'LOG', '0')).toEqual([]);
  });

  it('lets a peer add gossip jobs that the regional user works off', async () => {
    const peer = new Redis(peerUrl, { maxRetriesPerRequest: null });
    const regional = new Redis(regionalUrl, { maxRetriesPerRequest: null });
    closers.push(
      () => peer.quit(),
      () => regional.quit(),
    );
    const queue = new Queue('gossip-acl', { connection: peer, prefix: GOSSIP_QUEUE_PREFIX });
    closers.push(() => queue.close());
    const received = new Promise<unknown>((resolve) => {
      const worker = new Worker('gossip-acl', async (job) => resolve(job.data), {
        connection: regional,
        prefix: GOSSIP_QUEUE_PREFIX,
        drainDelay: 1,
      });
      closers.push(() => worker.close());
    });
    await queue.add('batch', { from: 'eu-west', keys: 3 }, { removeOnComplete: true });
    expect(await received).toEqual({ from: 'eu-west', keys: 3 });
  });

  it('keeps each user to its keys and away from admin commands', async () => {
    const peer = new Redis(peerUrl, { maxRetriesPerRequest: 0 });
    const regional = new Redis(regionalUrl, { maxRetriesPerRequest: 0 });
    closers.push(
      () => peer.quit(),
      () => regional.quit(),
    );
    await expect(peer.hget('qf:{s1}:m', 'fence')).rejects.toThrow(/NOPERM/);
    await expect(regional.get('session:123')).rejects.toThrow(/NOPERM/);
    await expect(regional.flushall()).rejects.toThrow(/NOPERM/);
    await expect(regional.call('CONFIG', 'SET', 'maxmemory', '1')).rejects.toThrow(/NOPERM/);
    await expect(peer.call('KEYS', '*')).rejects.toThrow(/NOPERM/);
  });
});

// The gossip queue's bookkeeping stays short: BullMQ writes several events per job to `<prefix>:gossip:events`,
// which nothing in quotafed reads, and a region's peers cap it (GOSSIP_EVENTS_MAX_LEN) as their queue starts; a
// completed job is kept only among the last GOSSIP_KEEP_COMPLETED. Real redis-servers, a's real link to b
// (peer-link.ts) and b's real gossip worker applying the jobs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { peerTargets } from '../../src/federation/gossip/connections.ts';
import { encodeJob, MESSAGE_VERSION, type GossipMessage } from '../../src/federation/gossip/message.ts';
import { createPeerLink, GOSSIP_EVENTS_MAX_LEN, GOSSIP_KEEP_COMPLETED, type PeerLink } from '../../src/federation/gossip/peer-link.ts';
import { layoutOf } from '../../src/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { startTestFederation, type TestFederation } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';

const JOBS = 150;

describe("the gossip queue's bookkeeping", () => {
  let fed: TestFederation;
  let link: PeerLink;
  beforeAll(async () => {
    fed = await startTestFederation({
      names: ['a', 'b'],
      syncIntervalMs: 50,
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000, period: '60s' }],
    });
    const a = fed.region('a');
    const target = peerTargets(a.config).find((peer) => peer.name === 'b')!;
    link = createPeerLink({ ...target, index: 1 }, 2_000, silentLogger(), layoutOf(a.config));
    await eventually(async () => (await link.fingerprint()) ?? undefined, 5_000, "b's Redis through the link");
  });
  afterAll(async () => {
    await link?.close();
    await fed?.close();
  });

  /** Heartbeats from a through its link, each with a sequence number of its own; resolves once b applied them all. */
  let seq = 7e15;
  const sendHeartbeats = async (count: number): Promise<void> => {
    const b = fed.region('b');
    const base = `${layoutOf(b.config).gossipQueuePrefix}:gossip`;
    const fingerprint = b.federation!.topology.fingerprint;
    for (let i = 0; i < count; i++) {
      const message: GossipMessage = {
        v: MESSAGE_VERSION,
        kind: 'heartbeat',
        from: 'a',
        to: 'b',
        fp: fingerprint,
        seq: seq++,
        sentAt: Date.now(),
        entries: [],
      };
      await link.add('heartbeat', encodeJob(message, 2, undefined));
    }
    await eventually(
      async () => ((await b.redis.llen(`${base}:wait`)) + (await b.redis.llen(`${base}:active`)) === 0 ? true : undefined),
      20_000,
      'the jobs applied',
    );
  };

  it(`keeps about ${GOSSIP_EVENTS_MAX_LEN} events however many jobs a region applies`, async () => {
    const b = fed.region('b');
    const base = `${layoutOf(b.config).gossipQueuePrefix}:gossip`;
    await sendHeartbeats(JOBS);
    expect(await b.redis.hget(`${base}:meta`, 'opts.maxLenEvents')).toBe(String(GOSSIP_EVENTS_MAX_LEN));
    const info = (await b.redis.call('XINFO', 'STREAM', `${base}:events`)) as (string | number)[];
    const field = (name: string) => Number(info[info.indexOf(name) + 1]);
    // Several events per job were written (added, waiting, active, completed) ...
    expect(field('entries-added')).toBeGreaterThan(3 * JOBS);
    // ... and the stream was trimmed as it grew: BullMQ's MAXLEN ~ keeps whole nodes of 100 entries.
    expect(field('length')).toBeGreaterThanOrEqual(GOSSIP_EVENTS_MAX_LEN);
    expect(field('length')).toBeLessThan(GOSSIP_EVENTS_MAX_LEN + 100);
    expect(await b.redis.zcard(`${base}:failed`)).toBe(0);
  }, 60_000);

  it(`keeps the last ${GOSSIP_KEEP_COMPLETED} completed jobs, their data included, and no other`, async () => {
    const b = fed.region('b');
    const base = `${layoutOf(b.config).gossipQueuePrefix}:gossip`;
    // More jobs than are kept, all applied: only the newest stay, each a whole job hash.
    await sendHeartbeats(GOSSIP_KEEP_COMPLETED + 5);
    const kept = await b.redis.zrange(`${base}:completed`, '0', '-1');
    expect(kept).toHaveLength(GOSSIP_KEEP_COMPLETED);
    for (const id of kept) expect(await b.redis.hexists(`${base}:${id}`, 'data')).toBe(1);
    const jobHashes: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await b.redis.scan(cursor, 'MATCH', `${base}:[0-9]*`, 'COUNT', '1000');
      cursor = next;
      jobHashes.push(...batch);
    } while (cursor !== '0');
    expect(jobHashes.sort()).toEqual(kept.map((id) => `${base}:${id}`).sort());
    expect(Number(await b.redis.get(`${base}:id`))).toBeGreaterThanOrEqual(GOSSIP_KEEP_COMPLETED + 5);
  });
});

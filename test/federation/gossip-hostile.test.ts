// Gossip hardening: a job whose data is not JSON is failed, counted and logged once (not cycled between
// waiting and active); a 30 MB job is refused before it is read (HSTRLEN), and decisions on the same region do
// not stall while it is refused; jobs of an older message version are each refused and counted, and said once.
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GOSSIP_QUEUE } from '../../src/federation/gossip/worker.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';
import { GOSSIP_QUEUE_PREFIX } from '../../src/keys.ts';
import { captureLog, type CapturedLog } from '../service/fixtures.ts';

let fed: TestFederation;
let b: TestRegion;
let inbound: Queue;
let log: CapturedLog;
const JOB = (id: string) => `${GOSSIP_QUEUE_PREFIX}:${GOSSIP_QUEUE}:${id}`;
const FAILED = `${GOSSIP_QUEUE_PREFIX}:${GOSSIP_QUEUE}:failed`;

beforeAll(async () => {
  log = captureLog();
  fed = await startTestFederation({
    names: ['a', 'b'],
    secret: 'hostile-secret-0123456789abcdef',
    syncIntervalMs: 50,
    logger: log.logger,
    rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000_000, period: '60s' }],
  });
  b = fed.region('b');
  inbound = new Queue(GOSSIP_QUEUE, { connection: { host: '127.0.0.1', port: b.server.port }, prefix: GOSSIP_QUEUE_PREFIX });
});
afterAll(async () => {
  await inbound?.close();
  await fed?.close();
});

async function rejectedCount(reason: string): Promise<number> {
  const metric = await b.registry.getSingleMetric('quotafed_federation_rejected_jobs_total')!.get();
  return metric.values.filter((value) => value.labels.reason === reason).reduce((sum, value) => sum + value.value, 0);
}

/** Moves a parked job to the wait list and wakes the worker (what BullMQ's promote does, without reading the job). */
async function release(id: string): Promise<void> {
  const base = `${GOSSIP_QUEUE_PREFIX}:${GOSSIP_QUEUE}`;
  await b.redis.zrem(`${base}:delayed`, id);
  await b.redis.lpush(`${base}:wait`, id);
  await b.redis.zadd(`${base}:marker`, 0, '0');
}

/** A job parked in the delayed set (the worker does not see it), so its content can be set before it is released. */
async function parked(data: object): Promise<string> {
  const job = await inbound.add('gossip', data, { delay: 3_600_000 });
  return job.id!;
}

describe('hostile gossip jobs', () => {
  it('refuses every version 2 job (a peer not yet upgraded) as `version`, counts each and warns once', async () => {
    const before = await rejectedCount('version');
    const fp = b.federation!.topology.fingerprint;
    const v2 = (seq: number) => ({
      v: 2,
      kind: 'heartbeat',
      from: 'a',
      to: 'b',
      fp,
      seq,
      sentAt: Date.now(),
      entries: [],
      mac: 'f'.repeat(64),
    });
    const jobs = await Promise.all([1, 2, 3].map((seq) => inbound.add('heartbeat', v2(seq))));
    for (const job of jobs)
      await eventually(async () => (await b.redis.zscore(FAILED, job.id!)) !== null || undefined, 10_000, `job ${job.id} to fail`);
    for (const job of jobs) expect(await b.redis.hget(JOB(job.id!), 'failedReason')).toBe('rejected: version');
    expect(await rejectedCount('version')).toBe(before + 3);
    const warned = log
      .lines()
      .filter((line) => line.event === 'federation.gossip_rejected' && line.reason === 'version' && (line.level as number) >= 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ peer: 'a', detail: 'message version 2, this region reads 3' });
  });

  it('fails a job whose data is not JSON once, counts it as invalid and logs it once', async () => {
    const before = await rejectedCount('invalid');
    const id = await parked({});
    await b.redis.hset(JOB(id), 'data', '{not json');
    await release(id);
    await eventually(async () => (await b.redis.zscore(FAILED, id)) !== null || undefined, 10_000, 'the job to fail');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await b.redis.zscore(FAILED, id)).not.toBeNull();
    expect(await b.redis.lpos(`${GOSSIP_QUEUE_PREFIX}:${GOSSIP_QUEUE}:wait`, id)).toBeNull();
    expect(await b.redis.lpos(`${GOSSIP_QUEUE_PREFIX}:${GOSSIP_QUEUE}:active`, id)).toBeNull();
    expect(await b.redis.hget(JOB(id), 'failedReason')).toBe('rejected: invalid');
    expect(await rejectedCount('invalid')).toBe(before + 1);
    const lines = log.lines().filter((line) => line.event === 'federation.gossip_rejected' && String(line.detail).includes(`job ${id}:`));
    expect(lines).toHaveLength(1);
  });

  it('refuses a 30 MB job unread while decisions keep their latency', async () => {
    const before = await rejectedCount('oversized');
    const id = await parked({ padding: 'x'.repeat(30 * 1024 * 1024) });
    await new Promise((resolve) => setTimeout(resolve, 200)); // the add's own serialisation is not measured
    const latencies: number[] = [];
    let running = true;
    const decide = async () => {
      let i = 0;
      while (running) {
        const started = performance.now();
        await b.engine.decide({ apiKey: `k${i++ % 1000}`, ip: '10.0.0.1', method: 'GET', path: '/' });
        latencies.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    };
    const deciding = Promise.all([decide(), decide()]);
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      await release(id);
      await eventually(async () => (await b.redis.zscore(FAILED, id)) !== null || undefined, 10_000, 'the job to be refused');
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      running = false;
      await deciding;
    }

    latencies.sort((x, y) => x - y);
    const max = latencies.at(-1)!;
    console.info(
      JSON.stringify({ probe: 'gossip-30mb', decisions: latencies.length, p50: latencies[Math.floor(latencies.length / 2)], max }),
    );
    expect(latencies.length).toBeGreaterThan(50);
    // Refused before it is read: a job read whole and parsed on the worker's event loop would stall it for most of a second.
    expect(max).toBeLessThan(250);
    expect(await b.redis.hget(JOB(id), 'failedReason')).toBe('rejected: oversized');
    expect(await b.redis.hstrlen(JOB(id), 'data')).toBeLessThan(10); // dropped in Redis too
    expect(await rejectedCount('oversized')).toBe(before + 1);
  });
});

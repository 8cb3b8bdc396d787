// The inbound gossip worker on BullMQ's public manual-processing API, against a real redis-server: it applies
// jobs two at a time, retries a job whose apply failed, fails a rejected one without retry, takes no job in the
// script that finishes another (BullMQ's own run loop is never started), skips a take that could find nothing
// (yet takes a retry after its backoff), and closes promptly while it waits for work.
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { ApplyOutcome } from '../../src/federation/gossip/apply.ts';
import { GOSSIP_QUEUE, startGossipWorker, type GossipWorker } from '../../src/federation/gossip/worker.ts';
import { GOSSIP_QUEUE_PREFIX } from '../../src/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { client, useRedis } from '../harness/redis.ts';
import { eventually } from '../support/wait.ts';

const server = await useRedis();
const redis = client(server.url);
const config = parseConfig({
  region: 'worker',
  redis: { url: server.url },
  rules: [{ name: 'r', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1 }],
});
const queue = new Queue(GOSSIP_QUEUE, { connection: { host: '127.0.0.1', port: server.port }, prefix: GOSSIP_QUEUE_PREFIX });
afterAll(() => queue.close());
const base = `${GOSSIP_QUEUE_PREFIX}:${GOSSIP_QUEUE}`;
const applied: ApplyOutcome = { status: 'applied', kind: 'gossip', entries: 1, changed: 1, skipped: 0 };

describe('gossip worker', () => {
  let worker: GossipWorker | undefined;
  afterAll(() => worker?.close(true));

  it('applies jobs at most two at a time, retries failures and fails rejections once', async () => {
    await redis.flushall();
    let active = 0;
    let most = 0;
    const seen: string[] = [];
    let flaky = 0;
    worker = startGossipWorker(
      config.redis,
      async (data) => {
        const { n } = data as { n: string };
        active += 1;
        most = Math.max(most, active);
        await new Promise((resolve) => setTimeout(resolve, 30));
        active -= 1;
        seen.push(n);
        if (n === 'flaky' && flaky++ === 0) throw new Error('transient');
        if (n === 'bad') return { status: 'rejected', reason: 'invalid', detail: 'test' };
        return applied;
      },
      silentLogger(),
    );
    expect(worker.worker.isRunning()).toBe(false); // BullMQ's own loop (and its fetch-next) is not used
    for (const n of ['a', 'b', 'c', 'd', 'e', 'f']) await queue.add('gossip', { n });
    const flakyJob = await queue.add('gossip', { n: 'flaky' }, { attempts: 2 });
    const badJob = await queue.add('gossip', { n: 'bad' }, { attempts: 3 });
    await eventually(async () => ((await redis.zcard(`${base}:completed`)) === 7 ? true : undefined), 10_000, 'seven completed');
    await eventually(async () => ((await redis.zscore(`${base}:failed`, badJob.id!)) !== null ? true : undefined), 10_000, 'bad failed');
    expect(most).toBe(2);
    expect(seen.filter((n) => n === 'flaky')).toHaveLength(2);
    expect(seen.filter((n) => n === 'bad')).toHaveLength(1);
    expect(await redis.hget(`${base}:${badJob.id}`, 'failedReason')).toBe('rejected: invalid');
    expect(await redis.zscore(`${base}:completed`, flakyJob.id!)).not.toBeNull();
    expect(await redis.llen(`${base}:active`)).toBe(0);
  });

  it('skips the take when nothing waits, yet takes a retry that waits out its backoff', async () => {
    await worker?.close();
    await redis.flushall();
    let tries = 0;
    worker = startGossipWorker(
      config.redis,
      async (data) => {
        if ((data as { n: string }).n === 'late' && tries++ === 0) throw new Error('transient');
        return applied;
      },
      silentLogger(),
    );
    // Every command the server runs goes to the slow log, the commands scripts run included: each take of BullMQ's
    // (its moveToActive script) tries RPOPLPUSH from the wait list to the active list.
    await redis.config('SET', 'slowlog-log-slower-than', '0');
    await redis.config('SET', 'slowlog-max-len', '100000');
    await redis.slowlog('RESET');
    const logged = async (match: (args: string[]) => boolean) =>
      ((await redis.slowlog('GET', -1)) as [number, number, number, string[]][]).filter(([, , , args]) => match(args)).length;
    const takes = () =>
      logged((args) => args[0]?.toLowerCase() === 'rpoplpush' && args[1] === `${base}:wait` && args[2] === `${base}:active`);
    // The screen: the EVALSHA whose first keys are the wait list and the failed set.
    const screens = () =>
      logged((args) => args[0]?.toLowerCase() === 'evalsha' && args[3] === `${base}:wait` && args[4] === `${base}:failed`);
    try {
      // Jobs one at a time, each after the worker went back to waiting: one take each, not a take that finds it
      // and empty takes after it (15 takes for these 5 jobs before the screen answered the empty ones).
      for (let i = 0; i < 5; i++) {
        const job = await queue.add('gossip', { n: String(i) });
        await eventually(async () => ((await redis.zscore(`${base}:completed`, job.id!)) !== null ? true : undefined), 5_000, `job ${i}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(await takes()).toBe(5);
      // Two screens a job: before the take that finds it and before the one that would not. Before the screen dropped
      // the marker BullMQ's take sets again, the worker woke on it once more after each job (14 or 15 screens).
      expect(await screens()).toBeLessThanOrEqual(10);
      // A failed try goes to the delayed set for its backoff: the screen must not call that nothing to take.
      const late = await queue.add('gossip', { n: 'late' }, { attempts: 3, backoff: { type: 'fixed', delay: 300 } });
      await eventually(async () => ((await redis.zscore(`${base}:completed`, late.id!)) !== null ? true : undefined), 5_000, 'retried');
      expect(tries).toBe(2);
    } finally {
      await redis.config('SET', 'slowlog-log-slower-than', '10000');
    }
  });

  it('closes within a second or two while waiting for work', async () => {
    const started = performance.now();
    await worker!.close();
    worker = undefined;
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});

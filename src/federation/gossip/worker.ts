// This region's inbound gossip: a BullMQ Worker on the `gossip` queue in the region's own Redis. Peers add
// jobs there (their only cross-region traffic); the worker applies them (apply.ts). A rejected job is failed
// without retries, so it stays in the failed set (bounded) for forensics and never touches a counter.
// The queue lives under the layout's BullMQ prefix, {<redis.keyPrefix>} ({qf} by default): on a Redis Cluster the
// queue's keys share that hash tag, so BullMQ's scripts stay in one slot.
//
// Hostile or broken jobs cost the region little, and never its decisions (which use another connection):
//   - before each job is taken, screen_gossip.lua measures the next jobs' data with HSTRLEN and fails those above
//     LIMITS.maxBytes unread (their data dropped in Redis too), so a 30 MB job is never read or parsed;
//   - jobs are taken and finished through BullMQ's manual-processing API (getNextJob, then moveToCompleted or
//     moveToFailed with fetchNext false), so no job is ever taken in the script that finishes another (that take
//     would skip the screen); two jobs run at a time, their locks extended while they run;
//   - a job whose data is not JSON (or that slipped past the screen oversized) is turned into a refusal before
//     BullMQ parses it, then failed without retries: counted under its reason and logged once, never cycled.
//     The screen and BullMQ's take are two calls, so a job pushed to the wait list between them is taken
//     unscreened: it is read once (never parsed), and its data is dropped in Redis before it is failed.
// Two protected hooks of BullMQ's Worker remain (createJob: refuse before parsing; moveToActive: screen right
// before each take, also after a blocking wait), both pinned by test/federation/gossip-hostile.test.ts. The screen
// also says whether a take could find a job; when none waits, is delayed or prioritized, the take is skipped and
// answered empty through the protected nextJobFromJobData, as BullMQ's own take answers it (after each job the
// worker tries a take before it blocks: that empty take was one of a job's round trips), and the screen drops the
// base marker BullMQ's take set again after the job (which woke the blocked worker at once to find nothing).
import { UnrecoverableError, Worker, type Job, type JobJson } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../../config/schema.ts';
import { runScreenGossip, screenGossipCall } from '../../store/gossip-calls.ts';
import { withScript } from '../../store/commands.ts';
import { layoutOf } from '../../keys.ts';
import type { Applier } from './apply.ts';
import { workerClusterConnection, workerOptions } from './connections.ts';
import { LIMITS, type RejectReason } from './message.ts';
import { GOSSIP_KEEP_COMPLETED, GOSSIP_KEEP_FAILED, GOSSIP_QUEUE } from './peer-link.ts';

/** Field of the stand-in data of a job refused before parsing. */
const REFUSED = '__quotafedRefused';
/** Jobs at the tail of the wait list screened before each take (the worker takes 2 at a time). */
const SCREEN_DEPTH = 8;
/** Gossip jobs applied at once: merges of one sender are independent (max), so 2 keeps two peers flowing. */
const CONCURRENCY = 2;
/** How long a taken job stays locked to this worker; extended every half of it while the job runs. */
const LOCK_MS = 30_000;
/** Pause after a failed take (Redis down) before the next one. */
const RETRY_MS = 1_000;

interface Refusal {
  reason: RejectReason;
  detail: string;
}

/** Reports a job refused before it reached the applier (count it, log it once). */
export type RefusalReporter = (reason: RejectReason, detail: string) => void;

class GossipQueueWorker extends Worker {
  /** The JSON size of each job's data as read (so it is not serialised again to be measured). */
  readonly sizes = new WeakMap<Job, number>();
  onScreened: (id: string, size: number) => void = () => undefined;

  protected override createJob(data: JobJson, jobId: string): Job {
    const raw = (data as { data?: unknown }).data;
    const size = typeof raw === 'string' ? raw.length : 0;
    const refuse = (refusal: Refusal) => super.createJob({ ...data, data: JSON.stringify({ [REFUSED]: refusal }) }, jobId);
    let job: Job;
    if (size > LIMITS.maxBytes) {
      job = refuse({ reason: 'oversized', detail: `${size} bytes (not parsed)` });
    } else {
      try {
        job = super.createJob(data, jobId);
      } catch (error) {
        if (!(error instanceof SyntaxError)) throw error;
        job = refuse({ reason: 'invalid', detail: `job data is not JSON: ${error.message.slice(0, 100)}` });
      }
    }
    this.sizes.set(job, size);
    return job;
  }

  protected override async moveToActive(token: string, name?: string): Promise<Job> {
    // Nothing waits, is delayed or prioritized: BullMQ's take would find nothing. Answer it as the take would (the
    // worker is drained), so the next take blocks on the queue's marker, which a job added meanwhile has set.
    if (!(await this.screen())) return this.nextJobFromJobData(undefined, undefined, token);
    return super.moveToActive(token, name);
  }

  private async redis(): Promise<Redis | Cluster> {
    return (await this.backend.client) as unknown as Redis | Cluster;
  }

  /** Replaces a refused job's data in Redis by `{}`, as the screen does, so the failed set does not keep it. */
  async dropData(job: Job): Promise<void> {
    await (await this.redis()).hset(this.toKey(job.id!), 'data', '{}');
  }

  /** Screens the next jobs; returns whether a take may find a job (true when the screen could not tell). */
  private async screen(): Promise<boolean> {
    try {
      const client = withScript(await this.redis(), 'screenGossip');
      const call = screenGossipCall({
        waitKey: this.keys.wait!,
        failedKey: this.keys.failed!,
        delayedKey: this.keys.delayed!,
        prioritizedKey: this.keys.prioritized!,
        markerKey: this.keys.marker!,
        jobPrefix: this.toKey(''),
        maxBytes: LIMITS.maxBytes,
        depth: SCREEN_DEPTH,
        now: Date.now(),
      });
      const { refused, takeable } = await runScreenGossip(client, call);
      for (const { id, bytes } of refused) this.onScreened(id, bytes);
      return takeable;
    } catch {
      // The screen is a guard, not a gate: the size check in createJob still refuses an oversized job.
      return true;
    }
  }
}

export { GOSSIP_QUEUE };

export interface GossipWorker {
  readonly worker: Worker;
  /** Closes the worker (force: without waiting for the active job), then the cluster connection it owns. */
  close(force?: boolean): Promise<void>;
}

export function startGossipWorker(
  redis: Config['redis'],
  apply: Applier,
  logger: Logger,
  refused: RefusalReporter = () => undefined,
): GossipWorker {
  // BullMQ builds (and closes) a plain connection from options, but takes a Cluster only as an instance.
  const cluster: Cluster | undefined = redis.clusterNodes ? workerClusterConnection(redis.clusterNodes, redis.tls) : undefined;
  cluster?.on('error', (error: Error) =>
    logger.debug({ event: 'federation.worker_redis_error', error: error.message }, 'gossip worker Redis error'),
  );
  const worker: GossipQueueWorker = new GossipQueueWorker(GOSSIP_QUEUE, null, {
    connection: cluster ?? workerOptions(redis.url, redis.tls),
    prefix: layoutOf({ redis }).gossipQueuePrefix,
    autorun: false,
    lockDuration: LOCK_MS,
    removeOnComplete: { count: GOSSIP_KEEP_COMPLETED },
    removeOnFail: { count: GOSSIP_KEEP_FAILED },
    // Wake-ups come from BullMQ's marker on add; this only bounds an idle blocking wait, and with it a graceful close
    // (BullMQ's close waits for the wait to end: at BullMQ's default of 5 s every service stop took 5 s,
    // test/federation/gossip-worker.test.ts).
    drainDelay: 1,
  });
  worker.onScreened = (id, size) => refused('oversized', `job ${id}: ${size} bytes, refused unread`);
  worker.on('error', (error) => logger.debug({ event: 'federation.worker_error', error: error.message }, 'gossip worker error'));

  /** Applies one job; a refusal or a rejected message throws UnrecoverableError (failed, never retried). */
  const processJob = async (job: Job): Promise<unknown> => {
    const refusal = (job.data as Record<string, unknown> | null)?.[REFUSED] as Refusal | undefined;
    if (refusal !== undefined) {
      refused(refusal.reason, `job ${job.id}: ${refusal.detail}`);
      if (refusal.reason === 'oversized') await worker.dropData(job).catch(() => undefined);
      throw new UnrecoverableError(`rejected: ${refusal.reason}`);
    }
    const bytes = worker.sizes.get(job) ?? Buffer.byteLength(JSON.stringify(job.data ?? null), 'utf8');
    const outcome = await apply(job.data, bytes);
    if (outcome.status === 'rejected') throw new UnrecoverableError(`rejected: ${outcome.reason}`);
    return outcome;
  };

  /** Runs one taken job and finishes it in Redis without taking the next (fetchNext false). */
  const runJob = async (job: Job, token: string): Promise<void> => {
    const renew = setInterval(() => void job.extendLock(token, LOCK_MS).catch(() => undefined), LOCK_MS / 2);
    renew.unref();
    try {
      let result: unknown;
      try {
        result = await processJob(job);
      } catch (error) {
        clearInterval(renew);
        const failure = error instanceof Error ? error : new Error(String(error));
        if (!(failure instanceof UnrecoverableError)) {
          logger.warn(
            { event: 'federation.apply_failed', job: job.id, error: failure.message },
            'applying a gossip job failed; BullMQ retries it',
          );
        }
        await job.moveToFailed(failure, token, false);
        return;
      }
      clearInterval(renew);
      await job.moveToCompleted(result, token, false);
    } catch (error) {
      // Finishing failed (Redis gone, lock lost): the stalled-job check hands the job out again.
      logger.debug({ event: 'federation.worker_error', job: job.id, error: (error as Error).message }, 'gossip job not finished');
    } finally {
      clearInterval(renew);
    }
  };

  let stopping = false;
  const running = new Set<Promise<void>>();
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  // The take loop: one take at a time (each screened in moveToActive), at most CONCURRENCY jobs running.
  const loop = (async () => {
    let taken = 0;
    while (!stopping) {
      if (running.size >= CONCURRENCY) {
        await Promise.race(running);
        continue;
      }
      const token = `${worker.id}:${taken++}`;
      let job: Job | undefined;
      try {
        job = await worker.getNextJob(token, { block: true });
      } catch (error) {
        if (stopping) break;
        logger.debug({ event: 'federation.worker_error', error: (error as Error).message }, 'gossip worker could not take a job');
        await pause(RETRY_MS);
        continue;
      }
      if (job === undefined) continue;
      const run: Promise<void> = runJob(job, token).finally(() => running.delete(run));
      running.add(run);
    }
    await Promise.allSettled(running);
  })();
  // A crashed instance's taken jobs come back to the wait list (BullMQ's stalled-job check).
  void worker
    .startStalledCheckTimer()
    .catch((error: Error) => logger.debug({ event: 'federation.worker_error', error: error.message }, 'gossip stalled-job check failed'));

  return {
    worker,
    async close(force = false) {
      stopping = true;
      wake?.();
      // A forced close means Redis may be gone: drop the connection first so nothing waits on it.
      if (force) cluster?.disconnect();
      try {
        // Unforced: the jobs running now finish first (a take in progress ends with the connections below).
        if (!force) await Promise.allSettled(running);
        await worker.close(force);
        await loop;
      } finally {
        cluster?.disconnect();
      }
    },
  };
}

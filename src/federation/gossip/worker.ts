// This region's inbound gossip: a BullMQ Worker on the `gossip` queue in the region's own Redis. Peers add
// jobs there (their only cross-region traffic); the worker applies them (apply.ts). A rejected job is failed
// without retries, so it stays in the failed set (bounded) for forensics and never touches a counter.
// On a Redis Cluster the queue's keys share the {qf} hash tag, so BullMQ's scripts stay in one slot.
import { UnrecoverableError, Worker } from 'bullmq';
import type { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../../config/schema.ts';
import { GOSSIP_QUEUE_PREFIX } from '../../keys.ts';
import type { Applier } from './apply.ts';
import { workerClusterConnection, workerOptions } from './connections.ts';
import { GOSSIP_QUEUE } from './peer-link.ts';

export { GOSSIP_QUEUE };

export interface GossipWorker {
  readonly worker: Worker;
  /** Closes the worker (force: without waiting for the active job), then the cluster connection it owns. */
  close(force?: boolean): Promise<void>;
}

export function startGossipWorker(redis: Config['redis'], apply: Applier, logger: Logger): GossipWorker {
  // BullMQ builds (and closes) a plain connection from options, but takes a Cluster only as an instance.
  const cluster: Cluster | undefined = redis.clusterNodes ? workerClusterConnection(redis.clusterNodes, redis.tls) : undefined;
  cluster?.on('error', (error: Error) => logger.debug({ event: 'federation.worker_redis_error', error: error.message }, 'gossip worker Redis error'));
  const worker = new Worker(
    GOSSIP_QUEUE,
    async (job) => {
      const bytes = Buffer.byteLength(JSON.stringify(job.data ?? null), 'utf8');
      const outcome = await apply(job.data, bytes);
      if (outcome.status === 'rejected') throw new UnrecoverableError(`rejected: ${outcome.reason}`);
      return outcome;
    },
    {
      connection: cluster ?? workerOptions(redis.url, redis.tls),
      prefix: GOSSIP_QUEUE_PREFIX,
      // Jobs of one sender are independent merges (max), so order does not matter; 2 keeps two peers flowing.
      concurrency: 2,
      removeOnComplete: { count: 100 },
      removeOnFail: { count: 1_000 },
      // Wake-ups come from BullMQ's marker on add; this only bounds an idle poll.
      drainDelay: 1,
    },
  );
  worker.on('error', (error) => logger.debug({ event: 'federation.worker_error', error: error.message }, 'gossip worker error'));
  worker.on('failed', (job, error) => {
    if (!(error instanceof UnrecoverableError) && !error.message.startsWith('rejected:')) {
      logger.warn({ event: 'federation.apply_failed', job: job?.id, error: error.message }, 'applying a gossip job failed; BullMQ retries it');
    }
  });
  return {
    worker,
    async close(force = false) {
      // A forced close means Redis may be gone: drop the connection first so nothing waits on it.
      if (force) cluster?.disconnect();
      try {
        await worker.close(force);
      } finally {
        cluster?.disconnect();
      }
    },
  };
}

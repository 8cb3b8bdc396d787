// Runs one region's HTTP service in several processes that share the listening port (node:cluster), so the
// service uses every core. The primary only supervises: it forks the workers, restarts one that crashes
// (bounded), and on SIGTERM/SIGINT asks each worker to finish its in-flight requests and stop.
//
//   const code = await serveClustered({ workers: 2, logger, start: () => startRegionService(config) });
//
// Every worker runs the full service (its own Redis client, over-limit cache and, when federated, the
// federation loop: the publisher lock lets one of them publish). The over-limit cache is per worker, which
// is safe: it only repeats denials Redis made.
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Logger } from '../log.ts';

export interface Stoppable {
  close(): Promise<void>;
}

export interface ClusterModeOptions<T extends Stoppable> {
  /** Starts the service in a worker; called once per worker process. */
  start: () => Promise<T>;
  /** Worker processes; defaults to the number of cores. */
  workers?: number;
  logger: Logger;
  /** A worker that dies unexpectedly is replaced, at most this many times a minute (then the primary gives up). */
  maxRestartsPerMinute?: number;
  /** Primary only: called once every worker listens, with the address the first one reported. */
  onListening?: (address: { address: string; port: number }) => void;
}

const SHUTDOWN = 'quotafed:shutdown';

/** Resolves with the process exit code: in the primary when all workers have stopped, in a worker when it has. */
export async function serveClustered<T extends Stoppable>(options: ClusterModeOptions<T>): Promise<number> {
  return cluster.isPrimary ? supervise(options) : runWorker(options);
}

async function runWorker<T extends Stoppable>(options: ClusterModeOptions<T>): Promise<number> {
  const { logger } = options;
  // The primary decides when to stop (a terminal Ctrl-C reaches every process of the group at once).
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => undefined);
  let service: T;
  try {
    service = await options.start();
  } catch (error) {
    logger.error({ event: 'cluster.worker_start_failed', error: (error as Error).message }, 'worker could not start');
    return 1;
  }
  return new Promise((resolve) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      service.close().then(
        () => resolve(0),
        (error: unknown) => {
          logger.error({ event: 'cluster.worker_stop_failed', error: (error as Error).message }, 'worker shutdown failed');
          resolve(1);
        },
      );
    };
    process.on('message', (message) => {
      if (message === SHUTDOWN) stop();
    });
    // The primary went away without telling us: stop rather than serve unsupervised.
    process.once('disconnect', stop);
  });
}

function supervise<T extends Stoppable>(options: ClusterModeOptions<T>): Promise<number> {
  const { logger } = options;
  const wanted = Math.max(1, options.workers ?? availableParallelism());
  const maxRestarts = options.maxRestartsPerMinute ?? 5;
  const restarts: number[] = [];
  const listening = new Set<number>();
  let reported = false;
  let stopping = false;
  let failed = false;

  return new Promise((resolve) => {
    const fork = () => {
      const worker = cluster.fork();
      worker.once('listening', (address) => {
        listening.add(worker.id);
        if (!reported && listening.size >= wanted) {
          reported = true;
          logger.info({ event: 'cluster.listening', workers: wanted, port: address.port }, `${wanted} workers listening`);
          options.onListening?.({ address: address.address ?? '127.0.0.1', port: address.port });
        }
      });
      return worker;
    };

    const alive = () => Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined);

    const stopAll = (reason: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ event: 'cluster.stopping', reason }, 'stopping workers');
      for (const worker of alive()) if (worker.isConnected()) worker.send(SHUTDOWN);
    };

    cluster.on('exit', (worker, code, signal) => {
      listening.delete(worker.id);
      if (!stopping) {
        const now = Date.now();
        while (restarts.length && now - restarts[0]! > 60_000) restarts.shift();
        if (restarts.length >= maxRestarts) {
          failed = true;
          logger.error({ event: 'cluster.giving_up', restarts: restarts.length }, 'workers keep dying; stopping');
          stopAll('restart limit');
        } else {
          restarts.push(now);
          logger.warn({ event: 'cluster.worker_died', pid: worker.process.pid, code, signal }, 'worker died; starting another');
          fork();
        }
      }
      if (alive().length === 0 && stopping) resolve(failed ? 1 : 0);
    });

    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        logger.warn({ event: 'cluster.forced_exit', signal }, 'second signal: killing workers');
        for (const worker of alive()) worker.process.kill('SIGKILL');
        resolve(1);
        return;
      }
      stopAll(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);

    for (let i = 0; i < wanted; i++) fork();
  });
}

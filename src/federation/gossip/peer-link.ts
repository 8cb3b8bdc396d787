// The producer side of one gossip link: a BullMQ Queue on the peer's Redis, over a client of our own that fails
// fast. BullMQ's Queue needs a ready connection when it initialises (a failed init stays failed), so the Queue
// is built once the client is ready and rebuilt if its initialisation failed.
import { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { GOSSIP_QUEUE_PREFIX, META_KEY } from '../../keys.ts';
import { producerConnection, type GossipTarget } from './connections.ts';
import type { GossipJob, MessageKind } from './message.ts';

export const GOSSIP_QUEUE = 'gossip';

export interface PeerLink {
  readonly name: string;
  readonly index: number;
  /** Adds the job (named by its kind) to the peer's queue; rejects at once when the peer is unreachable. */
  add(kind: MessageKind, job: GossipJob): Promise<void>;
  /** The topology fingerprint the peer published in its qf:meta; null when unknown or unreachable. */
  fingerprint(): Promise<string | null>;
  close(): Promise<void>;
}

/** A peer given with `clusterNodes` is a Redis Cluster: the link then uses a Cluster connection. */
export function createPeerLink(peer: GossipTarget & { name: string; index: number }, timeoutMs: number, logger: Logger): PeerLink {
  const client = producerConnection(peer, timeoutMs);
  client.on('error', (error: Error) =>
    logger.debug({ event: 'federation.peer_redis_error', peer: peer.name, error: error.message }, 'peer Redis error'),
  );
  let queue: Queue | undefined;

  const ready = async (): Promise<Queue> => {
    if (client.status !== 'ready') throw new Error(`${peer.name}'s Redis is not connected (${client.status})`);
    if (queue === undefined) {
      queue = new Queue(GOSSIP_QUEUE, {
        connection: client,
        prefix: GOSSIP_QUEUE_PREFIX,
        defaultJobOptions: { removeOnComplete: 100, removeOnFail: 1_000, attempts: 5, backoff: { type: 'exponential', delay: 200 } },
      });
      queue.on('error', (error: Error) =>
        logger.debug({ event: 'federation.queue_error', peer: peer.name, error: error.message }, 'peer queue error'),
      );
    }
    const current = queue;
    try {
      await current.waitUntilReady();
    } catch (error) {
      if (queue === current) queue = undefined;
      current.close().catch(() => undefined);
      throw error;
    }
    return current;
  };

  return {
    name: peer.name,
    index: peer.index,
    async add(kind, job) {
      await (await ready()).add(kind, job);
    },
    async fingerprint() {
      if (client.status !== 'ready') return null;
      return client.hget(META_KEY, 'fingerprint').catch(() => null);
    },
    async close() {
      await queue?.close().catch(() => undefined);
      client.disconnect();
    },
  };
}

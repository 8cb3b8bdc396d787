// The producer side of one gossip link: a BullMQ Queue on the peer's Redis, over a client of our own that fails
// fast. BullMQ's Queue needs a ready connection when it initialises (a failed init stays failed), so the Queue
// is built once the client is ready and rebuilt if its initialisation failed.
import { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { KeyLayout } from '../../keys.ts';
import { producerConnection, type GossipTarget } from './connections.ts';
import { foreignPrefixScan } from './foreign-prefix.ts';
import { RULE_TERMS_FIELD } from '../rule-identity.ts';
import type { GossipJob, MessageKind } from './message.ts';

export const GOSSIP_QUEUE = 'gossip';

/**
 * The most events BullMQ keeps in the gossip queue's event stream (`<prefix>:gossip:events`, trimmed approximately:
 * whole stream nodes of 100). Nothing in quotafed reads that stream; at BullMQ's default of 10,000 it held about
 * 700 kB per region (some 70 B an event, several events a job) whatever the number of keys. A listener that follows
 * the queue live (BullMQ's QueueEvents) still sees every event; only the history is short.
 */
export const GOSSIP_EVENTS_MAX_LEN = 100;

/**
 * Completed gossip jobs a region's queue keeps (the sender's job option, and the worker's for jobs without one);
 * failed jobs keep 1,000 for forensics. Nothing in quotafed reads a completed job: the last few stay for a look with
 * redis-cli or a queue dashboard. A kept job holds its whole message (about 1 to 4 kB each with BullMQ's fields), so
 * at 100 the completed set alone took 170-200 kB a region whatever its key count.
 */
export const GOSSIP_KEEP_COMPLETED = 10;
/** Failed (refused) gossip jobs a region's queue keeps, for forensics. */
export const GOSSIP_KEEP_FAILED = 1_000;

export interface PeerLink {
  readonly name: string;
  readonly index: number;
  /** Adds the job (named by its kind) to the peer's queue; rejects at once when the peer is unreachable. */
  add(kind: MessageKind, job: GossipJob): Promise<void>;
  /** The topology fingerprint the peer published in its <prefix>:meta; null when unknown or unreachable. */
  fingerprint(): Promise<string | null>;
  /** The rule terms the peer published in its <prefix>:meta (rule-identity.ts), as JSON; null when unknown or unreachable. */
  ruleTerms(): Promise<string | null>;
  /**
   * The key prefix another quotafed deployment of this peer's region runs under on the peer's Redis, found when this
   * layout's meta is missing there (the regions' `redis.keyPrefix` differ); null when none was found.
   */
  foreignPrefix(): Promise<string | null>;
  close(): Promise<void>;
}

/**
 * A peer given with `clusterNodes` is a Redis Cluster: the link then uses a Cluster connection. The peer's queue and
 * meta are under `keys`, this region's layout (every region of a federation uses the same `redis.keyPrefix`).
 */
export function createPeerLink(
  peer: GossipTarget & { name: string; index: number },
  timeoutMs: number,
  logger: Logger,
  keys: KeyLayout,
): PeerLink {
  const client = producerConnection(peer, timeoutMs);
  client.on('error', (error: Error) =>
    logger.debug({ event: 'federation.peer_redis_error', peer: peer.name, error: error.message }, 'peer Redis error'),
  );
  let queue: Queue | undefined;
  const foreign = foreignPrefixScan(client, keys, peer.name);

  const ready = async (): Promise<Queue> => {
    if (client.status !== 'ready') throw new Error(`${peer.name}'s Redis is not connected (${client.status})`);
    if (queue === undefined) {
      queue = new Queue(GOSSIP_QUEUE, {
        connection: client,
        prefix: keys.gossipQueuePrefix,
        defaultJobOptions: {
          removeOnComplete: GOSSIP_KEEP_COMPLETED,
          removeOnFail: GOSSIP_KEEP_FAILED,
          attempts: 5,
          backoff: { type: 'exponential', delay: 200 },
        },
        // The peer's queue meta takes the cap as this Queue starts; BullMQ's scripts trim the stream to it.
        streams: { events: { maxLen: GOSSIP_EVENTS_MAX_LEN } },
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
      return client.hget(keys.metaKey, 'fingerprint').catch(() => null);
    },
    async ruleTerms() {
      if (client.status !== 'ready') return null;
      return client.hget(keys.metaKey, RULE_TERMS_FIELD).catch(() => null);
    },
    async foreignPrefix() {
      if (client.status !== 'ready') return null;
      return foreign.next().catch(() => null);
    },
    async close() {
      await queue?.close().catch(() => undefined);
      client.disconnect();
    },
  };
}

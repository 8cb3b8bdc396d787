// Plan assignments to every region (docs/plans.md): an assignment written here is stored in each peer's Redis the
// way a federation-wide key reset reaches them (src/federation/key-reset.ts: a short-lived fail-fast connection to
// the peer's Redis), not on the gossip queues. Before it is sent it goes into this region's outbox
// (KeyLayout.plansPendingKey); a peer that does not store it stays there, and every process of the region retries the
// outbox every `retryMs` until the peer does: a region cut off gets every assignment when it comes back. Storing a
// write twice changes nothing and the newest write per key wins wherever it lands (src/engine/admin-plans.ts), so
// retries, concurrent retries and any order of arrival converge on the same assignment in every region.
import type { Config } from '../config/schema.ts';
import { assignmentField, assignmentValue, parseAssignment, storeAssignment } from '../engine/admin-plans.ts';
import { errorMessage } from '../engine/errors.ts';
import type { PlanAssignment } from '../engine/plans.ts';
import { layoutOf } from '../keys.ts';
import type { Logger } from '../log.ts';
import type { RegionRedis } from '../store/client.ts';
import { waitReady } from '../store/client.ts';
import { peerTargets, producerConnection } from './gossip/connections.ts';

/** What one peer did with an assignment: stored it, or why not yet (it stays in the outbox). */
export interface PlanDelivery {
  region: string;
  stored: boolean;
  error?: string;
}

/**
 * Sends plan assignments to every peer and retries those not stored yet.
 *
 * @example
 * ```ts
 * const gossip = createPlanGossip({ config, redis, logger, retryMs: 2_000 });
 * const peers = await gossip.deliver('partner-key', assignment); // [{ region: 'eu-west', stored: true }, ...]
 * gossip.close();
 * ```
 */
export interface PlanGossip {
  /** Puts the write in the outbox for every peer, then tries each peer once; what each did. */
  deliver(apiKey: string, assignment: PlanAssignment): Promise<PlanDelivery[]>;
  /** Tries every write of the outbox once (the retry timer runs this); how many remain. */
  retry(): Promise<number>;
  close(): void;
}

export interface PlanGossipOptions {
  config: Config;
  redis: RegionRedis;
  logger: Logger;
  /** How often the outbox is retried. */
  retryMs: number;
}

const pendingField = (peer: string, field: string) => `${peer}|${field}`;

export function createPlanGossip(options: PlanGossipOptions): PlanGossip {
  const { config, redis } = options;
  // Every region of a federation uses the same prefix: a peer's assignments live under this region's plansKey.
  const keys = layoutOf(config);
  const pendingKey = keys.plansPendingKey;
  const log = options.logger.child({ module: 'plan-gossip' });
  const peers = peerTargets(config);
  const timeoutMs = Math.max(config.redis.commandTimeoutMs, config.redis.connectTimeoutMs);
  let retrying = false;

  /** Stores the writes in one peer's Redis; the fields stored (removed from the outbox). */
  const sendTo = async (peer: (typeof peers)[number], writes: ReadonlyArray<{ apiKey: string; assignment: PlanAssignment }>) => {
    const connection = producerConnection(peer, timeoutMs);
    connection.on('error', () => {}); // reported from the command that failed
    try {
      await waitReady(connection, timeoutMs);
      for (const write of writes) await storeAssignment(connection, keys, write.apiKey, write.assignment);
      await redis.hdel(pendingKey, ...writes.map((write) => pendingField(peer.name, assignmentField(write.apiKey, write.assignment))));
      return undefined;
    } catch (error) {
      return errorMessage(error);
    } finally {
      connection.disconnect();
    }
  };

  const retryOnce = async (): Promise<number> => {
    const pending = await redis.hgetall(pendingKey);
    const byPeer = new Map<string, Array<{ apiKey: string; assignment: PlanAssignment }>>();
    for (const [field, value] of Object.entries(pending)) {
      const at = field.indexOf('|');
      const parsed = at === -1 ? undefined : parseAssignment(field.slice(at + 1), value);
      if (!parsed) continue;
      const list = byPeer.get(field.slice(0, at)) ?? [];
      list.push(parsed);
      byPeer.set(field.slice(0, at), list);
    }
    let remaining = 0;
    await Promise.all(
      peers.map(async (peer) => {
        const writes = byPeer.get(peer.name);
        if (!writes) return;
        const error = await sendTo(peer, writes);
        if (error === undefined)
          log.info({ event: 'plans.delivered', peer: peer.name, writes: writes.length }, 'plan assignments delivered');
        else remaining += writes.length;
      }),
    );
    return remaining;
  };

  const timer = setInterval(() => {
    if (retrying) return;
    retrying = true;
    void retryOnce()
      .catch(() => 0)
      .finally(() => {
        retrying = false;
      });
  }, options.retryMs);
  timer.unref();

  return {
    async deliver(apiKey, assignment) {
      if (peers.length === 0) return [];
      const field = assignmentField(apiKey, assignment);
      const value = assignmentValue(assignment);
      const outbox = Object.fromEntries(peers.map((peer) => [pendingField(peer.name, field), value]));
      await redis.hset(pendingKey, outbox);
      return Promise.all(
        peers.map(async (peer): Promise<PlanDelivery> => {
          const error = await sendTo(peer, [{ apiKey, assignment }]);
          if (error === undefined) return { region: peer.name, stored: true };
          log.warn({ event: 'plans.undelivered', peer: peer.name, error }, 'plan assignment not stored by a peer yet; retrying');
          return { region: peer.name, stored: false, error };
        }),
      );
    },
    retry: () => retryOnce(),
    close() {
      clearInterval(timer);
    },
  };
}

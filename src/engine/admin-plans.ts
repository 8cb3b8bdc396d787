// The plan assignments of the admin API (PUT /admin/plans/<apiKey>), kept in the region's Redis (KeyLayout.plansKey,
// src/keys.ts) as the admin lists are (src/engine/admin-lists.ts): each process holds a copy and re-reads it every
// `lists.refreshMs` (one HGET of the change counter; the whole hash only when it moved) and right after its own
// writes; while Redis does not answer, the last copy stays in force. Unlike the lists, assignments are gossiped to
// every region (src/federation/plan-gossip.ts). Every write is a field of its own, named by its time and region, so
// writes never overwrite each other whatever the order they arrive in: the newest per key wins when read (last
// writer wins, src/engine/plans.ts), and the losers are deleted then.
import type { KeyLayout } from '../keys.ts';
import type { Logger } from '../log.ts';
import { HASH_VERSION_FIELD as VERSION_FIELD, startHashCopy } from './hash-copy.ts';
import type { RegionRedis } from '../store/client.ts';
import { newer, type PlanAssignment } from './plans.ts';

/** The most API keys the admin API assigns plans to in one federation. */
export const MAX_PLAN_ASSIGNMENTS = 100_000;

/** The hash field of one write: `a:<at>:<region>:<apiKey>` (the API key last: it may hold ":"). */
export function assignmentField(apiKey: string, assignment: PlanAssignment): string {
  return `a:${assignment.at}:${assignment.region}:${apiKey}`;
}

/** The value stored under a write's field. */
export function assignmentValue(assignment: PlanAssignment): string {
  return JSON.stringify({ plan: assignment.plan, previous: assignment.previous });
}

/** One field and value back as a write; undefined for a field of another shape (written by hand). */
export function parseAssignment(field: string, value: string): { apiKey: string; assignment: PlanAssignment } | undefined {
  const match = /^a:(\d{1,15}):([a-z0-9-]{1,32}):([\s\S]+)$/.exec(field);
  if (!match) return undefined;
  let body: { plan?: unknown; previous?: unknown };
  try {
    body = JSON.parse(value) as typeof body;
  } catch {
    return undefined;
  }
  const plan = typeof body.plan === 'string' ? body.plan : null;
  const previous = typeof body.previous === 'string' ? body.previous : null;
  return { apiKey: match[3]!, assignment: { plan, previous, at: Number(match[1]), region: match[2]! } };
}

/**
 * Stores one write in a region's Redis (this region's, or a peer's when gossiped): its own field and a change of
 * the counter, in one transaction. Storing the same write twice changes nothing.
 *
 * @example
 * ```ts
 * await storeAssignment(redis, layoutOf(config), 'partner-key', { plan: 'pro', previous: 'free', at: Date.now(), region: 'us-east' });
 * ```
 */
export async function storeAssignment(redis: RegionRedis, keys: KeyLayout, apiKey: string, assignment: PlanAssignment): Promise<void> {
  const { plansKey } = keys;
  const reply = await redis
    .multi()
    .hset(plansKey, assignmentField(apiKey, assignment), assignmentValue(assignment))
    .hincrby(plansKey, VERSION_FIELD, 1)
    .exec();
  if (reply === null || reply.some(([error]) => error)) throw reply?.find(([error]) => error)?.[0] ?? new Error('plans write aborted');
}

/**
 * The region's plan assignments: the copy the engine reads per request, and the admin API's writes.
 *
 * @example
 * ```ts
 * const plans = createAdminPlans({ redis, keys: layoutOf(config), refreshMs: 1000, logger });
 * await plans.put('partner-key', { plan: 'pro', previous: 'free', at: Date.now(), region: 'us-east' });
 * plans.assignment('partner-key'); // { plan: 'pro', ... }
 * plans.close();
 * ```
 */
export interface AdminPlans {
  /** The winning write for this API key, as of the last refresh (deleted assignments included, plan null). */
  assignment(apiKey: string): PlanAssignment | undefined;
  /** How many API keys have a write. */
  size(): number;
  /** Re-read from Redis now (throws when Redis does not answer; the old copy stays). */
  refresh(): Promise<void>;
  /** Stores a write in this region and refreshes this process's copy. */
  put(apiKey: string, assignment: PlanAssignment): Promise<void>;
  close(): void;
}

export interface AdminPlansOptions {
  redis: RegionRedis;
  /** The deployment's key layout (`redis.keyPrefix`): the assignments live in its plansKey. */
  keys: KeyLayout;
  refreshMs: number;
  logger: Logger;
}

/** The hash back as the winning write per API key, and the fields of the losing writes. */
function parseHash(hash: Record<string, string>): { winners: Map<string, PlanAssignment>; losers: string[] } {
  const winners = new Map<string, PlanAssignment>();
  const fields = new Map<string, string>();
  const losers: string[] = [];
  for (const [field, value] of Object.entries(hash)) {
    const parsed = parseAssignment(field, value);
    if (!parsed) continue;
    const held = winners.get(parsed.apiKey);
    if (held === undefined || newer(parsed.assignment, held)) {
      if (held !== undefined) losers.push(fields.get(parsed.apiKey)!);
      winners.set(parsed.apiKey, parsed.assignment);
      fields.set(parsed.apiKey, field);
    } else {
      losers.push(field);
    }
  }
  return { winners, losers };
}

export function createAdminPlans(options: AdminPlansOptions): AdminPlans {
  const { redis, keys } = options;
  const { plansKey } = keys;
  const log = options.logger.child({ module: 'admin-plans' });
  let winners = new Map<string, PlanAssignment>();
  const copy = startHashCopy({
    redis,
    key: plansKey,
    onChange: async (hash) => {
      const parsed = parseHash(hash);
      winners = parsed.winners;
      // A losing write never wins again (the order is total): forget it. The counter does not move, nothing changed.
      if (parsed.losers.length > 0) await redis.hdel(plansKey, ...parsed.losers);
    },
    refreshMs: options.refreshMs,
    log,
    event: 'plans',
    what: 'plan assignments',
  });
  const { refresh, reread } = copy;

  return {
    assignment: (apiKey) => (winners.size === 0 ? undefined : winners.get(apiKey)),
    size: () => winners.size,
    refresh,
    async put(apiKey, assignment) {
      await storeAssignment(redis, keys, apiKey, assignment);
      await reread();
    },
    close() {
      copy.close();
    },
  };
}

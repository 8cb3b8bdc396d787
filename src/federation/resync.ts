// Serving a resync: a peer that lost its data asks for everything again. Every live federated state key here is
// marked pending for that peer (at its current version), and the publisher delivers them in its normal
// batches, so the wiped region rebuilds its views, its own row as the peers saw it included.
import { Cluster, type Redis } from 'ioredis';
import { FEDERATED_ALGORITHMS, type Config } from '../config/schema.ts';
import { layoutOf, ruleNameOf, shardOfKey, type KeyLayout } from '../keys.ts';
import { isWrongTypeError } from '../store/client.ts';

/** Keys examined per SCAN step; the scan is bounded in steps as well (a safety net, not a limit in practice). */
const SCAN_COUNT = 500;
const MAX_STEPS = 100_000;

async function scanNode(node: Redis, layout: KeyLayout, visit: (keys: string[]) => Promise<void>): Promise<void> {
  let cursor = '0';
  for (let step = 0; step < MAX_STEPS; step++) {
    const [next, keys] = await node.scan(cursor, 'MATCH', layout.shardScanPattern, 'COUNT', SCAN_COUNT);
    if (keys.length > 0) await visit(keys);
    cursor = next;
    if (cursor === '0') return;
  }
}

/** Marks every live federated state key (under the config's key prefix) pending for `peerIndex`; returns how many were marked. */
export async function markAllPending(
  redis: Redis | Cluster,
  config: Pick<Config, 'rules'> & { redis?: Pick<Config['redis'], 'keyPrefix'> },
  peerIndex: number,
): Promise<number> {
  const layout = layoutOf(config);
  const federated = new Set(config.rules.filter((rule) => FEDERATED_ALGORITHMS.has(rule.algorithm)).map((rule) => rule.name));
  let marked = 0;
  const visit = async (keys: string[]) => {
    const candidates = keys.filter((key) => layout.statePattern.test(key) && federated.has(ruleNameOf(key)));
    // A key that is not a hash is a single region's token bucket (lua/includes/gcra.lua: this region decided the
    // rule alone before): it holds nothing for a peer, and its first federated decision makes it a hash.
    const read = await Promise.all(
      candidates.map((key) =>
        redis.hget(key, 'v').then(
          (version) => ({ key, version }),
          (error: unknown) => (isWrongTypeError(error) ? undefined : Promise.reject(error)),
        ),
      ),
    );
    const states = read.filter((entry) => entry !== undefined);
    // GT: never lower a score the decision path just raised (the ack compares against it).
    await Promise.all(
      states.map(({ key, version }) => redis.zadd(layout.peerPendingKey(shardOfKey(key), peerIndex), 'GT', Number(version ?? 0), key)),
    );
    marked += states.length;
    // Ring the bells of the shards marked for every lane (lua/includes/bell.lua: the element '1'), so the
    // publisher, waiting on them, sends at once. One transaction per bell: a bell rung for some lanes only is
    // replaced, never doubled.
    const shards = new Set(states.map(({ key }) => shardOfKey(key)));
    await Promise.all([...shards].map((shard) => redis.multi().del(layout.bellKey(shard)).rpush(layout.bellKey(shard), '1').exec()));
  };
  // Keys live on every primary of a cluster: scan each one (a replica holds copies, scanning it would only repeat).
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  // Before the cluster client knows its topology there are no nodes, and an empty scan would claim success.
  if (nodes.length === 0) throw new Error('the Redis Cluster topology is not known yet; resync retried with the job');
  for (const node of nodes) await scanNode(node, layout, visit);
  return marked;
}

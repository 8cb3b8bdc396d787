// An operator's reset of the state a request is counted against: its rules' state keys deleted in this
// region's Redis and, for a federation-wide reset, in every peer's (the same key names everywhere: every region of
// a federation uses the same redis.keyPrefix). It is an override, not part of the protocol: every region that
// forgets a key may admit its allowance again, so the window in which a key is reset everywhere may admit up to
// another L + B (docs/operations.md, "Resetting a key").
import type { Cluster, Redis } from 'ioredis';
import type { Config } from '../config/schema.ts';
import { errorMessage } from '../engine/errors.ts';
import { waitReady } from '../store/client.ts';
import { withScripts } from '../store/commands.ts';
import { resetKeyCall, runResetKey } from '../store/reset-calls.ts';
import { peerTargets, producerConnection } from './gossip/connections.ts';

/** What one region did: how many of the keys it held and deleted, or why it could not. */
export interface RegionReset {
  region: string;
  deleted: number;
  error?: string;
}

/** Resets `keys` (reset_key.lua, one call per key: each in its own hash slot); how many held state. */
async function resetKeys(redis: Redis | Cluster, keys: readonly string[], regions: number, markMs: number): Promise<number> {
  const scripted = withScripts(redis);
  const held = await Promise.all(keys.map((key) => runResetKey(scripted, resetKeyCall(key, regions, markMs))));
  return held.filter(Boolean).length;
}

/**
 * Resets the state keys in this region's Redis and, with `everywhere`, in each peer's through a short-lived
 * fail-fast connection (bounded by `timeoutMs`). Each region keeps a reset mark on the key for `markMs`
 * (reset_key.lua), so gossip about it already in flight when the reset ran cannot bring the old counts back. A
 * peer that cannot be reached is reported, not retried: the operator sees which regions may still hold the key.
 *
 * @example
 * ```ts
 * const regions = await resetStateKeys(config, redis, ['qf:{s12}:search:AbCdEfGhIjKlMnOp'], { everywhere: true, timeoutMs: 1_000, markMs: 120_000 });
 * // [{ region: 'us-east', deleted: 1 }, { region: 'eu-west', deleted: 1 }, { region: 'ap-south', deleted: 0 }]
 * ```
 */
export async function resetStateKeys(
  config: Config,
  redis: Redis | Cluster,
  keys: readonly string[],
  options: { everywhere: boolean; timeoutMs: number; markMs: number },
): Promise<RegionReset[]> {
  const regions = config.federation.peers.length + 1;
  const own: RegionReset = { region: config.region, deleted: await resetKeys(redis, keys, regions, options.markMs) };
  if (!options.everywhere) return [own];
  const peers = await Promise.all(
    peerTargets(config).map(async (peer): Promise<RegionReset> => {
      const connection = producerConnection(peer, options.timeoutMs);
      connection.on('error', () => {}); // reported below, from the command that failed
      try {
        await waitReady(connection, options.timeoutMs);
        return { region: peer.name, deleted: await resetKeys(connection, keys, regions, options.markMs) };
      } catch (error) {
        return { region: peer.name, deleted: 0, error: errorMessage(error) };
      } finally {
        connection.disconnect();
      }
    }),
  );
  return [own, ...peers];
}

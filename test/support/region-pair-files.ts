// Config files for two federated regions, us-east and eu-west, each on its own redis-server, written to a
// directory so a service can be started from a file and reloaded from it (POST /admin/policy/reload, SIGHUP).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';

export type PairRegion = 'us-east' | 'eu-west';

/**
 * Writes `<dir>/<region>.yaml` (port 0, silent logs, sync interval 50 ms, the other region as its peer) with
 * `rules` and any further `federation` settings, and returns its path.
 *
 * @example
 * const path = writePairConfig(dir, 'us-east', { 'us-east': east.url, 'eu-west': west.url }, [rule]);
 */
export function writePairConfig(
  dir: string,
  region: PairRegion,
  redisUrls: Record<PairRegion, string>,
  rules: unknown[],
  federation: Record<string, unknown> = {},
): string {
  const peer: PairRegion = region === 'us-east' ? 'eu-west' : 'us-east';
  const path = join(dir, `${region}.yaml`);
  writeFileSync(
    path,
    stringify({
      region,
      port: 0,
      logLevel: 'silent',
      redis: { url: redisUrls[region], commandTimeoutMs: 2000 },
      federation: { syncIntervalMs: 50, ...federation, peers: [{ name: peer, redisUrl: redisUrls[peer] }] },
      rules,
    }),
  );
  return path;
}

/**
 * Starts us-east, then eu-west, each from its file (reloadable from it), as the first start of a new federation.
 * The services go into `services` as they start, so a caller's `finally` closes what did start.
 *
 * @example
 * const [usEast, euWest] = await startPairFromFiles({ east, west }, services);
 */
export async function startPairFromFiles(
  paths: { east: string; west: string },
  services: RegionService[],
): Promise<[RegionService, RegionService]> {
  for (const path of [paths.east, paths.west]) {
    services.push(await startRegionService(loadConfigFile(path, {}), { configPath: path, dashboard: false, newFederation: true }));
  }
  return services.slice(-2) as [RegionService, RegionService];
}

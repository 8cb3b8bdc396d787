// Config files for federated regions (us-east and eu-west, and ap-south for three), each on its own redis-server,
// written to a directory so a service can be started from a file, reloaded from it (POST /admin/policy/reload,
// SIGHUP) and restarted on a rewritten one; and the HTTP reads the tests make of a running region.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';

export type RegionName = 'us-east' | 'eu-west' | 'ap-south';
export type PairRegion = Exclude<RegionName, 'ap-south'>;
/** The three regions in index order (names sorted). */
export const THREE_REGIONS = ['ap-south', 'eu-west', 'us-east'] as const satisfies readonly RegionName[];

/**
 * A redis-server for each of the three regions, stopped after the test file; their URLs by region.
 *
 * @example
 * const urls = await useRegionRedis();
 */
export async function useRegionRedis(): Promise<Record<RegionName, string>> {
  const servers = await Promise.all(THREE_REGIONS.map(() => useRedis()));
  return Object.fromEntries(THREE_REGIONS.map((name, i) => [name, servers[i]!.url])) as Record<RegionName, string>;
}

/**
 * Writes `<dir>/<region>.yaml` (port 0, silent logs, sync interval 50 ms) for a federation of the regions in
 * `redisUrls` (every other one is a peer), with `rules`, any further `federation` settings and the regions'
 * `weights` (1 where absent), and returns its path.
 *
 * @example
 * const path = writeRegionConfig(dir, 'ap-south', urls, [rule], { leakageBudget: 0 }, { 'ap-south': 1, 'eu-west': 2, 'us-east': 3 });
 */
export function writeRegionConfig(
  dir: string,
  region: RegionName,
  redisUrls: Partial<Record<RegionName, string>>,
  rules: unknown[],
  federation: Record<string, unknown> = {},
  weights: Partial<Record<RegionName, number>> = {},
): string {
  const weightOf = (name: string) => (weights[name as RegionName] === undefined ? {} : { weight: weights[name as RegionName] });
  const peers = Object.entries(redisUrls)
    .filter(([name]) => name !== region)
    .map(([name, redisUrl]) => ({ name, redisUrl, ...weightOf(name) }));
  const path = join(dir, `${region}.yaml`);
  writeFileSync(
    path,
    stringify({
      region,
      port: 0,
      logLevel: 'silent',
      redis: { url: redisUrls[region], commandTimeoutMs: 2000 },
      federation: { syncIntervalMs: 50, ...federation, ...weightOf(region), peers },
      rules,
    }),
  );
  return path;
}

/**
 * `writeRegionConfig` for the two regions us-east and eu-west.
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
  return writeRegionConfig(dir, region, redisUrls, rules, federation);
}

/**
 * Starts a region service from each file in turn (reloadable from it): by default as the first start of a new
 * federation, with `newFederation: false` as a restart on the state its Redis holds. The services go into `services`
 * as they start, so a caller's `finally` closes what did start; returns the ones started here.
 *
 * @example
 * const [usEast, euWest] = await startFromFiles([paths.east, paths.west], services, { newFederation: false });
 */
export async function startFromFiles(
  paths: string[],
  services: RegionService[],
  options: { newFederation?: boolean } = {},
): Promise<RegionService[]> {
  for (const path of paths) {
    services.push(
      await startRegionService(loadConfigFile(path, {}), {
        configPath: path,
        dashboard: false,
        newFederation: options.newFederation ?? true,
      }),
    );
  }
  return services.slice(-paths.length);
}

/**
 * Starts us-east, then eu-west, each from its file (reloadable from it), as the first start of a new federation.
 *
 * @example
 * const [usEast, euWest] = await startPairFromFiles({ east, west }, services);
 */
export async function startPairFromFiles(
  paths: { east: string; west: string },
  services: RegionService[],
): Promise<[RegionService, RegionService]> {
  return (await startFromFiles([paths.east, paths.west], services)) as [RegionService, RegionService];
}

/** The part of a `/v1/check` answer these tests read (README, "POST /v1/check"). */
export interface CheckVerdict {
  allowed: boolean;
  /** The limit the binding rule was decided at (the tighter one while a peer runs the rule otherwise). */
  limit: number;
  /** What this region can still admit on its own. */
  regionRemaining: number | null;
  /** Set when Redis did not decide (fail-open, local fallback). */
  degraded?: string;
  outcomes: Array<{ resetAtMs: number; periodMs: number }>;
}

/** One `/v1/check` of `apiKey` against `service`, decided by its Redis (no 5xx, not degraded). */
export async function checkAt(service: RegionService, apiKey: string): Promise<CheckVerdict> {
  const response = await fetch(`${service.url}/v1/check`, {
    method: 'POST',
    body: JSON.stringify({ apiKey, method: 'GET', path: '/' }),
  });
  expect(response.status).toBeLessThan(500);
  const verdict = (await response.json()) as CheckVerdict;
  expect(verdict.degraded).toBeUndefined();
  return verdict;
}

/** Sends `requests` checks of `apiKey` to `service` one after another; returns the answers in order. */
export async function checksAt(service: RegionService, apiKey: string, requests: number): Promise<CheckVerdict[]> {
  const verdicts: CheckVerdict[] = [];
  for (let i = 0; i < requests; i++) verdicts.push(await checkAt(service, apiKey));
  return verdicts;
}

/** How many of `verdicts` (of a fixedWindow rule) were admitted in each window, by window id (from the answer's reset). */
export function admittedByWindow(verdicts: CheckVerdict[]): Map<number, number> {
  const windows = new Map<number, number>();
  for (const { allowed, outcomes } of verdicts) {
    if (!allowed) continue;
    const id = outcomes[0]!.resetAtMs / outcomes[0]!.periodMs - 1;
    windows.set(id, (windows.get(id) ?? 0) + 1);
  }
  return windows;
}

/** The `warnings` of `service`'s `/readyz` (a peer that runs a rule with other parameters is listed there). */
export async function readyWarnings(service: RegionService): Promise<string[]> {
  const body = (await (await fetch(`${service.url}/readyz`)).json()) as { warnings?: string[] };
  return body.warnings ?? [];
}

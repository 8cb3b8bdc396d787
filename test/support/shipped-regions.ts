// The shipped regions (regions/*.yaml, what `npm start` runs) as a test runs them: on the test's own
// redis-servers and a free port, with a fast sync interval, a gossip secret and an upstream of the test's.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';

export type RawConfig = Record<string, unknown>;

/** The shipped region names, in the order tests start their servers. */
export const SHIPPED_REGIONS = ['us-east', 'eu-west', 'ap-south'] as const;

export interface ShippedRegionOptions {
  /** Each region's Redis URL, by region name. */
  redisUrl: (region: string) => string;
  upstreamUrl: string;
  secret: string;
  syncIntervalMs?: number;
  /** Changes to the raw document before it is parsed (extra rules, admin token, …). */
  edit?: (raw: RawConfig) => void;
}

/** regions/<name>.yaml moved onto the test's servers, parsed. */
export function shippedRegionConfig(name: string, options: ShippedRegionOptions): Config {
  const raw = parseYaml(readFileSync(new URL(`../../regions/${name}.yaml`, import.meta.url), 'utf8')) as RawConfig;
  raw.port = 0;
  raw.logLevel = 'silent';
  raw.redis = { ...(raw.redis as RawConfig), url: options.redisUrl(name), commandTimeoutMs: 2_000 };
  raw.upstream = { url: options.upstreamUrl };
  const federation = raw.federation as RawConfig;
  federation.syncIntervalMs = options.syncIntervalMs ?? 50;
  federation.secret = options.secret;
  federation.peers = (federation.peers as RawConfig[]).map((peer) => ({ ...peer, redisUrl: options.redisUrl(peer.name as string) }));
  options.edit?.(raw);
  return parseConfig(raw, `regions/${name}.yaml`);
}

/** The shipped regions running as services (no dashboard), by region name. */
export interface ShippedRegions {
  services: Map<string, RegionService>;
  close(): Promise<void>;
}

/** Starts every shipped region as a service on the test's servers (shippedRegionConfig), all at once. */
export async function startShippedRegions(options: ShippedRegionOptions): Promise<ShippedRegions> {
  const started = await Promise.all(
    SHIPPED_REGIONS.map((name) => startRegionService(shippedRegionConfig(name, options), { dashboard: false, newFederation: true })),
  );
  const services = new Map<string, RegionService>(SHIPPED_REGIONS.map((name, i) => [name, started[i]!]));
  return {
    services,
    close: async () => {
      await Promise.all([...services.values()].map((service) => service.close()));
    },
  };
}

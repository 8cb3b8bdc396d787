// The local federation's region configs (regions/*.yaml): which ports they name, and, when the operator moves
// the federation to other ports, copies of the configs rewritten consistently (own Redis, every peer's Redis,
// the service port and the upstream all move together).
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { parseConfig, type Config } from '../config/load.ts';

export interface LocalRegion {
  name: string;
  /** The config file the service is started with (the original, or a rewritten copy). */
  configPath: string;
  servicePort: number;
  redisPort: number;
  upstreamPort: number | undefined;
  config: Config;
}

export interface PortOverrides {
  /** In region order (the order of `servicePort` in the files: us-east, eu-west, ap-south). */
  redisPorts?: readonly number[];
  servicePorts?: readonly number[];
  upstreamPort?: number;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const DEFAULT_PORTS: Record<string, number> = { 'redis:': 6379, 'rediss:': 6379, 'http:': 80, 'https:': 443 };

function loopbackPort(url: string, what: string): number {
  const parsed = new URL(url);
  if (!LOOPBACK.has(parsed.hostname)) throw new Error(`${what} is ${url}; the local launcher only starts servers on 127.0.0.1`);
  return Number(parsed.port || DEFAULT_PORTS[parsed.protocol]);
}

function withPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.port = String(port);
  return parsed.toString().replace(/\/$/, '');
}

interface RegionFile {
  path: string;
  raw: Record<string, unknown>;
  config: Config;
}

/**
 * Every region config in `dir` that federates, sorted by service port. Templates and configs without peers
 * (regions/standalone.yaml: one region on its own) are not part of the local federation.
 */
function readRegionFiles(dir: string): RegionFile[] {
  const files = readdirSync(dir)
    .filter((name) => /\.ya?ml$/.test(name) && !name.includes('template'))
    .map((name) => join(dir, name));
  const regions = files
    .map((path) => {
      const raw = parseYaml(readFileSync(path, 'utf8')) as Record<string, unknown>;
      return { path, raw, config: parseConfig(raw, `config ${path}`) };
    })
    .filter((file) => file.config.federation.peers.length > 0)
    .sort((a, b) => a.config.port - b.config.port);
  if (regions.length === 0) throw new Error(`no federated region configs (*.yaml with federation.peers) in ${dir}`);
  return regions;
}

function checkCount(values: readonly number[] | undefined, count: number, flag: string): void {
  if (values !== undefined && values.length !== count)
    throw new Error(`${flag} needs ${count} ports (one per region), got ${values.length}`);
}

/**
 * The regions of the local federation. Without overrides the original files are used as they are; with
 * overrides, rewritten copies go to a temporary directory (the originals are never changed).
 */
export function localRegions(dir: string, overrides: PortOverrides = {}): LocalRegion[] {
  const files = readRegionFiles(dir);
  checkCount(overrides.redisPorts, files.length, '--redis-ports');
  checkCount(overrides.servicePorts, files.length, '--ports');

  const redisPortOf = new Map<string, number>();
  files.forEach((file, index) =>
    redisPortOf.set(
      file.config.region,
      overrides.redisPorts?.[index] ?? loopbackPort(file.config.redis.url, `${file.config.region} redis.url`),
    ),
  );
  const moved = overrides.redisPorts !== undefined || overrides.servicePorts !== undefined || overrides.upstreamPort !== undefined;
  const outDir = moved ? mkdtempSync(join(tmpdir(), 'quotafed-regions-')) : undefined;

  return files.map((file, index) => {
    const { config } = file;
    if (config.redis.clusterNodes !== undefined)
      throw new Error(`${config.region} uses redis.clusterNodes; the local launcher starts one redis-server per region`);
    for (const peer of config.federation.peers) {
      if (!redisPortOf.has(peer.name)) throw new Error(`${config.region} names peer ${peer.name}, which has no config in ${dir}`);
      const expected = redisPortOf.get(peer.name)!;
      if (!moved && loopbackPort(peer.redisUrl, `${config.region} peer ${peer.name}`) !== expected) {
        throw new Error(
          `${config.region} reaches peer ${peer.name} at ${peer.redisUrl}, but ${peer.name}'s own config uses port ${expected}`,
        );
      }
    }
    const servicePort = overrides.servicePorts?.[index] ?? config.port;
    const redisPort = redisPortOf.get(config.region)!;
    const upstreamUrl = config.upstream.url;
    const upstreamPort =
      upstreamUrl === undefined ? undefined : (overrides.upstreamPort ?? loopbackPort(upstreamUrl, `${config.region} upstream.url`));
    if (outDir === undefined) return { name: config.region, configPath: file.path, servicePort, redisPort, upstreamPort, config };

    // biome-ignore lint/suspicious/noExplicitAny: the file's raw YAML, edited in place and validated by parseConfig below
    const raw = structuredClone(file.raw) as Record<string, any>;
    raw.port = servicePort;
    raw.redis = { ...(raw.redis ?? {}), url: withPort(config.redis.url, redisPort) };
    if (upstreamUrl !== undefined && upstreamPort !== undefined)
      raw.upstream = { ...(raw.upstream ?? {}), url: withPort(upstreamUrl, upstreamPort) };
    if (Array.isArray(raw.federation?.peers)) {
      raw.federation.peers = raw.federation.peers.map((peer: Record<string, unknown>) => ({
        ...peer,
        redisUrl: withPort(String(peer.redisUrl), redisPortOf.get(String(peer.name))!),
      }));
    }
    const configPath = join(outDir, `${config.region}.yaml`);
    writeFileSync(configPath, `# Rewritten by the local launcher from ${file.path} (ports moved).\n${stringifyYaml(raw)}`);
    return { name: config.region, configPath, servicePort, redisPort, upstreamPort, config: parseConfig(raw, `config ${configPath}`) };
  });
}

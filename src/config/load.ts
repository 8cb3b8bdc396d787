// Reads a region config (YAML), applies the documented environment overrides and validates it.
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { EnvoyImportError, expandEnvoyImports } from './envoy-import.ts';
import { Config, type ConfigInput } from './schema.ts';
import { unexpandPlans } from './plans.ts';

/** Environment variables that override deployment settings of the file. Names are a public contract. */
export const ENV_OVERRIDES = {
  QUOTAFED_CONFIG: 'path of the YAML config (when --config is not given)',
  QUOTAFED_PORT: 'port',
  QUOTAFED_GRPC_PORT: 'grpc.port',
  QUOTAFED_HOST: 'host',
  QUOTAFED_REDIS_URL: 'redis.url',
  QUOTAFED_UPSTREAM_URL: 'upstream.url',
  QUOTAFED_ADMIN_TOKEN: 'admin.token',
  QUOTAFED_ADMIN_PORT: 'admin.port',
  QUOTAFED_FEDERATION_SECRET: 'federation.secret',
  QUOTAFED_FEDERATION_BOOTSTRAP: 'federation.bootstrap',
  QUOTAFED_LOG_LEVEL: 'logLevel',
  // Plus QUOTAFED_PEER_<NAME>_REDIS_URL per peer (see peerEnvName).
} as const;

/**
 * A config that does not validate: `message` names every bad field, `fields` lists their paths.
 *
 * @example
 * ```ts
 * try {
 *   loadConfigFile('regions/us-east.yaml');
 * } catch (error) {
 *   if (error instanceof ConfigError) console.error(error.message, error.fields); // e.g. ['rules[0].limit']
 *   else throw error;
 * }
 * ```
 */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly fields: string[],
  ) {
    super(message);
    this.name = 'ConfigError';
  }
}

function formatPath(path: ReadonlyArray<PropertyKey>): string {
  return path.map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`)).join('') || '(root)';
}

/**
 * Validate an already-parsed object; throws ConfigError naming every bad field. envoyproxy/ratelimit documents
 * under `envoy` become rules first (`envoy.files` relative to `baseDir`).
 *
 * @example
 * ```ts
 * const config = parseConfig({
 *   region: 'us-east',
 *   redis: { url: 'redis://127.0.0.1:6379' },
 *   rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'tokenBucket', limit: 1000, period: '1m' }],
 * });
 * ```
 */
export function parseConfig(input: unknown, source = 'config', baseDir = process.cwd()): Config {
  return validate(input, source, baseDir, new Map());
}

/** Where a bad field's value came from: the environment variable that set it (`fromEnv`), else the file. */
function blame(path: string, fromEnv: ReadonlyMap<string, string>): string | undefined {
  for (const [field, variable] of fromEnv) {
    if (path === field || path.startsWith(`${field}.`) || path.startsWith(`${field}[`)) return variable;
  }
  return undefined;
}

/** parseConfig, with the fields the environment set (path → variable) blamed on their variables. */
function validate(input: unknown, source: string, baseDir: string, fromEnv: ReadonlyMap<string, string>): Config {
  // A loaded config loads again (spread into another): its plans' derived rules and routes are outputs.
  let expanded = unexpandPlans(input);
  if (typeof input === 'object' && input !== null && !Array.isArray(input)) {
    try {
      expanded = expandEnvoyImports(expanded as Record<string, unknown>, baseDir);
    } catch (error) {
      if (error instanceof EnvoyImportError) throw new ConfigError(`invalid ${source}: ${error.message}`, error.fields);
      throw error;
    }
  }
  const result = Config.safeParse(expanded);
  if (result.success) return result.data;
  const fields = result.error.issues.map((issue) => formatPath(issue.path));
  const variables = fields.map((field) => blame(field, fromEnv));
  const lines = result.error.issues.map((issue, i) => {
    const variable = variables[i];
    // The value is not repeated: an environment variable often carries a password.
    return variable === undefined ? `  ${fields[i]}: ${issue.message}` : `  ${variable} (sets ${fields[i]}): ${issue.message}`;
  });
  const heading = variables.every((variable) => variable !== undefined) ? `invalid environment for ${source}` : `invalid ${source}`;
  throw new ConfigError(`${heading}:\n${lines.join('\n')}`, fields);
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts.at(-1)!] = value;
}

const NUMERIC_ENV = new Set(['QUOTAFED_PORT', 'QUOTAFED_ADMIN_PORT', 'QUOTAFED_GRPC_PORT']);

/** QUOTAFED_PEER_<NAME>_REDIS_URL overrides that peer's redisUrl (name upper-cased, "-" as "_"). */
export function peerEnvName(peer: string): string {
  return `QUOTAFED_PEER_${peer.toUpperCase().replace(/-/g, '_')}_REDIS_URL`;
}

export function applyEnvOverrides(
  raw: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
  /** Filled with each field the environment set (its path as errors print it) and the variable that set it. */
  fromEnv: Map<string, string> = new Map(),
): Record<string, unknown> {
  const copy = structuredClone(raw);
  for (const [name, path] of Object.entries(ENV_OVERRIDES)) {
    if (name === 'QUOTAFED_CONFIG') continue;
    const value = env[name];
    if (value === undefined || value === '') continue;
    if (NUMERIC_ENV.has(name)) {
      const parsed = z.coerce.number().int().safeParse(value);
      if (!parsed.success)
        throw new ConfigError(`invalid environment: ${name}=${JSON.stringify(value)} is not an integer (sets ${path})`, [path]);
      setPath(copy, path, parsed.data);
    } else {
      setPath(copy, path, value);
    }
    fromEnv.set(path, name);
  }
  const federation = copy.federation as { peers?: unknown } | undefined;
  if (federation && Array.isArray(federation.peers)) {
    for (const [index, peer] of (federation.peers as Array<Record<string, unknown>>).entries()) {
      const name = typeof peer.name === 'string' ? peerEnvName(peer.name) : undefined;
      const value = name === undefined ? undefined : env[name];
      if (name === undefined || value === undefined || value === '') continue;
      peer.redisUrl = value;
      fromEnv.set(`federation.peers[${index}].redisUrl`, name);
    }
  }
  return copy;
}

/**
 * Read and validate a region's YAML file (`path`, or `QUOTAFED_CONFIG` when undefined), with the `QUOTAFED_*`
 * environment overrides applied; throws ConfigError naming every bad field.
 *
 * @example
 * ```ts
 * const config = loadConfigFile('regions/us-east.yaml');
 * const fromEnv = loadConfigFile(undefined); // the file QUOTAFED_CONFIG names
 * ```
 */
export function loadConfigFile(path: string | undefined, env: NodeJS.ProcessEnv = process.env): Config {
  const file = path ?? env.QUOTAFED_CONFIG;
  if (!file) throw new ConfigError('no config given: pass --config <file> or set QUOTAFED_CONFIG', ['--config']);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read config ${file}: ${(error as Error).message}`, ['--config']);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`config ${file} is not valid YAML: ${(error as Error).message}`, ['(root)']);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError(`config ${file} must be a YAML mapping`, ['(root)']);
  }
  const fromEnv = new Map<string, string>();
  const merged = applyEnvOverrides(raw as Record<string, unknown>, env, fromEnv);
  return validate(merged, `config ${file}`, dirname(file), fromEnv);
}

export type { Config, ConfigInput };

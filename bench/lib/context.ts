// What every section gets: the run mode, a scratch Redis started for the bench, and a place to put the
// figures the targets table is computed from.
import { Redis } from 'ioredis';
import { parseConfig } from '../../src/config/load.ts';
import type { Config, ConfigInput } from '../../src/config/schema.ts';
import type { RedisProcess } from '../../src/ops/redis-process.ts';
import type { RequestContext } from '../../src/engine/types.ts';
import type { Table } from './table.ts';

export interface BenchOptions {
  quick: boolean;
  /** Sections to run (all when empty). */
  only: string[];
}

export interface BenchContext {
  options: BenchOptions;
  redisServer: RedisProcess;
  /** A plain client for setup and INFO (never the client under test). */
  admin: Redis;
  /** Figures used by the targets table, by name. */
  figures: Record<string, number>;
  /** Scale a duration for --quick. */
  ms(full: number, quick: number): number;
}

export type Section = (ctx: BenchContext) => Promise<Table[]>;

export const HIGH_LIMIT = 1_000_000_000;

export type RuleInput = ConfigInput['rules'][number];

export function benchConfig(redisUrl: string, rules: RuleInput[], extra: Partial<ConfigInput> = {}): Config {
  return parseConfig({
    region: 'us-east',
    logLevel: 'silent',
    ...extra,
    redis: { url: redisUrl, commandTimeoutMs: 2_000, ...(extra.redis ?? {}) },
    rules,
  });
}

/** One rule keyed by API key, limit high enough that every decision takes the allow path. */
export function allowRule(algorithm: NonNullable<RuleInput['algorithm']>, name = algorithm as string): RuleInput {
  return { name, by: ['apiKey'], algorithm, limit: HIGH_LIMIT, period: '1m' };
}

export function apiKeyRequest(apiKey: string): RequestContext {
  return { apiKey, ip: '10.0.0.1', method: 'GET', path: '/v1/items' };
}

/** Key i of a set of `count` keys, visited in a scattered order so consecutive calls hit different keys. */
export function keyOf(index: number, count: number): string {
  return count === 1 ? 'hot-key' : `key-${(index * 7919) % count}`;
}

export function newClient(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
}

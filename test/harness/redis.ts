// Test-side helpers around real redis-server processes (see src/ops/redis-process.ts).
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { startRedis, type RedisProcess, type RedisProcessOptions } from '../../src/ops/redis-process.ts';

export type { RedisProcess };

/** Start a redis-server for this test file; it is stopped after the file's tests. */
export async function useRedis(options: RedisProcessOptions = {}): Promise<RedisProcess> {
  const server = await startRedis(options);
  afterAll(() => server.stop());
  return server;
}

/** A plain client for assertions (not the engine's client). Closed after the file's tests. */
export function client(url: string): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
  afterAll(() => redis.quit().catch(() => redis.disconnect()));
  return redis;
}

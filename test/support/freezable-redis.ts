// A real redis-server a test can freeze (SIGSTOP: every call to it times out) and thaw, with the region client the
// engine under test uses; both are resumed, closed and stopped after the file's tests.
import { afterAll } from 'vitest';
import type { Config } from '../../src/config/schema.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { createRegionRedis, waitReady, type RegionRedis } from '../../src/store/client.ts';

export interface FreezableRedis {
  /** Starts the redis-server (its URL goes into the test's config). */
  start(): Promise<RedisProcess>;
  /** The region client of `config`, ready. */
  connect(config: Config): Promise<RegionRedis>;
  freeze(): void;
  thaw(): void;
}

/**
 * @example
 * const frozen = useFreezableRedis();
 * const server = await frozen.start();
 * const redis = await frozen.connect(parseConfig({ region: 'r', redis: { url: server.url }, rules }));
 * frozen.freeze(); // ... decisions time out ...
 * frozen.thaw();
 */
export function useFreezableRedis(): FreezableRedis {
  let server: RedisProcess | undefined;
  let redis: RegionRedis | undefined;
  afterAll(async () => {
    if (server?.pid) process.kill(server.pid, 'SIGCONT');
    await redis?.quit().catch(() => redis?.disconnect());
    await server?.stop();
  });
  return {
    async start() {
      server = await startRedis();
      return server;
    },
    async connect(config) {
      redis = createRegionRedis(config);
      await waitReady(redis, 2_000);
      return redis;
    },
    freeze: () => process.kill(server!.pid!, 'SIGSTOP'),
    thaw: () => process.kill(server!.pid!, 'SIGCONT'),
  };
}

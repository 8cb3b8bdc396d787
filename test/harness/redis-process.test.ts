import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startRedis } from '../../src/ops/redis-process.ts';

describe('redis-server process harness', () => {
  it('starts on a free port, survives SIGKILL + restart with AOF, and stops', async () => {
    const server = await startRedis({ appendOnly: true });
    expect(server.port).not.toBe(6379);
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    await redis.set('k', 'v');
    await server.kill('SIGKILL');
    await server.restart();
    await expect(redis.get('k')).resolves.toBe('v');
    redis.disconnect();
    await server.stop();
  });
});

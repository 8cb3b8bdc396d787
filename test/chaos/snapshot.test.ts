// The redis-snapshot-restart fault's mechanics on a real redis-server: a BGSAVE mid-run, writes after it, a
// SIGKILL and a restart on the same port bring back the snapshot (the later writes lost, the marker kept, a new
// run_id), and once the snapshot is discarded a restart comes back empty (as redis-kill expects).
import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { discardSnapshot, rdbPath, takeSnapshot } from '../../chaos/lab/snapshot.ts';
import { redisRunId } from '../../src/federation/recovery.ts';
import { useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
redis.on('error', () => undefined);
afterAll(() => redis.disconnect());

async function reconnected(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await redis.ping().catch(() => null)) === 'PONG') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the client did not reconnect');
}

describe('chaos lab: Redis restarted from an RDB snapshot', () => {
  it('keeps what was written before the snapshot, loses what came after, and changes run_id', async () => {
    await redis.hset('qf:meta', 'started', '1');
    await redis.set('admitted', '20');
    await takeSnapshot(redis);
    expect(existsSync(rdbPath(server.dir))).toBe(true);
    await redis.set('admitted', '100');
    const before = await redisRunId(redis);

    await server.kill('SIGKILL');
    await server.restart();
    await reconnected();

    expect(await redis.get('admitted')).toBe('20');
    expect(await redis.hget('qf:meta', 'started')).toBe('1');
    const after = await redisRunId(redis);
    expect(after).not.toBe(before);
    expect(after).toMatch(/^\w{40}$/);
  });

  it('comes back empty once the snapshot is discarded', async () => {
    discardSnapshot(server.dir);
    expect(existsSync(rdbPath(server.dir))).toBe(false);
    await server.restart();
    await reconnected();
    expect(await redis.dbsize()).toBe(0);
  });
});

// The ioredis adapter behind the Upstash comparison: Upstash's own MultiRegionRatelimit, unchanged, against
// three real redis-server processes (Redis 7.0 rejects its script flag; the adapter must make it run).
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { upstashAdapter } from '../../chaos/peer/upstash-adapter.ts';
import { startUpstashPeer } from '../../chaos/peer/upstash.ts';
import { useRedis } from '../harness/redis.ts';

const servers = await Promise.all([useRedis(), useRedis(), useRedis()]);

describe('the Upstash peer on ioredis', () => {
  it('runs a script that carries a shebang flag Redis 7.0 rejects, then by its SHA', async () => {
    const redis = new Redis(servers[0]!.url);
    afterAll(() => redis.quit());
    const adapter = upstashAdapter(redis);
    const script = '#!lua flags=allow-key-locking\nreturn redis.call("INCRBY", KEYS[1], ARGV[1])';
    await expect(redis.eval(script, 1, 'x', 1)).rejects.toThrow(/Unexpected flag/);
    expect(await adapter.eval(script, ['adapter-test'], [2])).toBe(2);
    const { createHash } = await import('node:crypto');
    const sha = createHash('sha1').update(script).digest('hex');
    expect(await adapter.evalsha(sha, ['adapter-test'], [3])).toBe(5);
  });

  it('enforces the limit across three regions once every sync has landed', async () => {
    const urls = servers.map((s) => s.url);
    const regions = ['us-east', 'eu-west', 'ap-south'] as const;
    const peer = await startUpstashPeer(
      regions.map((region, i) => ({ region, ownRedisUrl: urls[i]!, peerRedisUrls: urls.filter((_, j) => j !== i) })),
      10,
      60_000,
    );
    onTestFinished(() => peer.close());
    const key = `k-${Date.now()}`;
    let admitted = 0;
    for (let i = 0; i < 15; i++) {
      const decision = await peer.limit(regions[i % 3]!, key);
      if (decision.allowed) admitted += 1;
      // Let the background sync copy this request to the other regions before the next one.
      for (let wait = 0; wait < 100 && peer.pending() > 0; wait++) await new Promise((r) => setTimeout(r, 10));
    }
    expect(admitted).toBe(10);
  });
});

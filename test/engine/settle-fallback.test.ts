// settle_fallback.lua: what the local fallback admitted is written into the rule's window in Redis (single
// region and federated layouts), counted by the next decisions and marked for gossip to the peers.
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { matchRules } from '../../src/engine/rules.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { peerPendingKey } from '../../src/keys.ts';
import { useRedis } from '../harness/redis.ts';

const rule = { name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 20, period: '1h', failMode: 'open' } as const;

describe('settling local fallback admissions', async () => {
  const server = await useRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  afterAll(() => redis.disconnect());

  for (const federated of [false, true]) {
    it(`${federated ? 'federated' : 'single region'}: the window counts them and a later decision sees them`, async () => {
      await redis.flushall();
      // A fresh federated Redis with intact markers (recovery would fence a Redis without them).
      if (federated) await markShardsIntact(redis);
      const config = parseConfig({
        region: 'a',
        redis: { url: server.url },
        federation: federated ? { leakageBudget: 0, peers: [{ name: 'b', redisUrl: 'redis://127.0.0.1:1' }] } : {},
        rules: [{ ...rule, name: federated ? 'fed' : 'solo' }],
      });
      const engine = createRedisEngine({ config, redis, overLimitCache: false });
      const request = { apiKey: 'k', ip: '10.0.0.1', method: 'GET', path: '/' };
      const [matched] = matchRules(config, request);
      const now = Date.now();
      const windowStart = now - (now % 3_600_000);
      await engine.decide(request); // 1 by Redis
      await engine.settle([{ rule: matched!.rule, key: matched!.key, shard: matched!.shard, windowStart, count: 4 }]);
      // A window Redis no longer keeps is skipped.
      await engine.settle([
        { rule: matched!.rule, key: matched!.key, shard: matched!.shard, windowStart: windowStart - 3 * 3_600_000, count: 100 },
      ]);
      const next = await engine.decide(request);
      // Single region: 20 - 1 - 4 - 1. Federated (two equal weights, budget 0): a's allowance 10 - 1 - 4 - 1.
      expect(next.outcomes[0]!.remaining).toBe(federated ? 4 : 14);
      // A window in the future (a gateway clock three periods ahead of Redis: the current window's slot) is
      // counted in the current window; it neither replaces that slot's counts nor is lost.
      await engine.settle([
        { rule: matched!.rule, key: matched!.key, shard: matched!.shard, windowStart: windowStart + 3 * 3_600_000, count: 2 },
      ]);
      const later = await engine.decide(request);
      expect(later.outcomes[0]!.remaining).toBe(federated ? 1 : 11);
      if (federated) expect(await redis.zscore(peerPendingKey(matched!.shard, 1), matched!.key)).not.toBeNull();
    });
  }
});

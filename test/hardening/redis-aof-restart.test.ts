// The region's Redis runs with AOF (appendfsync always) and is SIGKILLed and restarted under a
// running federated service. The state survives: the start-up marker and the shard markers are still there, so
// recovery sees no data loss and fences nothing, and both a regional and a federated limit continue exactly
// where they were.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_SHARDS, META_KEY, shardMarkerKey } from '../../src/keys.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { STARTED_FIELD } from '../../src/federation/recovery.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, eventually, seedConfig } from '../service/fixtures.ts';

const HOUR = 3_600_000;

describe('Redis with AOF: SIGKILL and restart under a running region', async () => {
  const peerRedis = await useRedis();
  let own: RedisProcess;
  let service: RegionService;
  let inspector: Redis;

  beforeAll(async () => {
    own = await startRedis({ appendOnly: true });
    inspector = new Redis(own.url, { maxRetriesPerRequest: 1 });
    inspector.on('error', () => undefined);
    service = await startRegionService(
      seedConfig(own.url, (raw) => {
        raw.region = 'us-east';
        // AOF with appendfsync always: a restart loses nothing, and the config says so.
        raw.redis = { url: own.url, commandTimeoutMs: 1_000, connectTimeoutMs: 1_000, durable: true };
        raw.breaker = { failureThreshold: 2, probeIntervalMs: 100, successThreshold: 1, localFallback: false };
        raw.federation = {
          syncIntervalMs: 100,
          leakageBudget: 0,
          secret: 'hardening-federation-secret',
          peers: [{ name: 'eu-west', redisUrl: peerRedis.url }],
        };
        raw.rules = [
          // Regional only (sliding log): exact against this Redis.
          {
            name: 'log',
            match: { endpoints: ['/log'] },
            by: ['apiKey'],
            algorithm: 'slidingLog',
            limit: 20,
            period: '1h',
            failMode: 'closed',
          },
          // Federated: this region's allowance is floor(20 · 1/2) = 10 with no budget and a silent peer.
          {
            name: 'fed',
            match: { endpoints: ['/fed'] },
            by: ['apiKey'],
            algorithm: 'fixedWindow',
            limit: 20,
            period: '1h',
            failMode: 'closed',
          },
        ];
      }),
      { newFederation: true },
    );
  });
  afterAll(async () => {
    await service?.close();
    inspector?.disconnect();
    await own?.stop();
  });

  const check = async (path: string) => {
    const res = await fetch(`${service.url}/v1/check`, {
      method: 'POST',
      body: JSON.stringify({ apiKey: 'aof-key', method: 'GET', path }),
    });
    return (await res.json()) as { allowed: boolean; outcomes: Array<{ source: string }> };
  };
  const admitted = async (path: string, attempts: number) => {
    let count = 0;
    for (let i = 0; i < attempts; i++) {
      const decision = await check(path);
      // Every decision here is Redis's: a fail mode or a fence would show up as another source or a denial.
      expect(
        decision.outcomes.every((o) => o.source === 'redis' || o.source === 'cache'),
        JSON.stringify(decision.outcomes),
      ).toBe(true);
      if (decision.allowed) count += 1;
    }
    return count;
  };
  const fences = async () =>
    (await Promise.all(Array.from({ length: KEY_SHARDS }, (_, s) => inspector.hget(shardMarkerKey(s), 'fence')))).filter((f) => f !== null);

  it('keeps counters, markers and the start-up record; no fence; limits continue exactly', async () => {
    await awayFromWindowEdge(HOUR, 30_000);
    expect(service.federation?.recovery?.fenced).toBe(false);
    expect(await admitted('/log', 12)).toBe(12);
    expect(await admitted('/fed', 6)).toBe(6);
    await service.federation!.flush();
    const startedBefore = await inspector.hget(META_KEY, STARTED_FIELD);
    const fencesBefore = await fences();
    expect(startedBefore).not.toBeNull();
    expect(fencesBefore.length).toBe(KEY_SHARDS);
    expect(fencesBefore.every((f) => f === '0')).toBe(true);

    await own.kill('SIGKILL');
    await own.restart();
    await eventually(
      async () => (await inspector.ping().catch(() => '')) === 'PONG' && service.redis.status === 'ready',
      10_000,
      'Redis to be back',
    );
    // Two federation rounds: the running check for lost data (the start-up marker) has looked at the restarted Redis.
    await service.federation!.flush();
    await service.federation!.flush();

    expect(await inspector.hget(META_KEY, STARTED_FIELD)).toBe(startedBefore);
    expect(await fences()).toEqual(fencesBefore);
    expect(service.engine.breaker.state).toBe('closed');

    // 20 − 12 on the regional rule, 10 − 6 on the federated one: exactly, then denials.
    expect(await admitted('/log', 12)).toBe(8);
    expect(await admitted('/fed', 8)).toBe(4);
    expect(await fences()).toEqual(fencesBefore);
  });
});

// A peer's Redis killed and restarted empty: two regions, a failMode closed federated rule with
// budget 0 (so at most `limit` per window across the federation). Region b spends its share, then its Redis is
// SIGKILLed and restarted empty while both regions keep asking. Nothing but a Redis decision may admit: b's
// breaker outage rejects, b's restarted (empty) Redis is fenced by recovery, and the window stays <= limit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { awayFromWindowEdge, eventually } from '../service/fixtures.ts';
import { silentLogger } from '../../src/log.ts';

const LIMIT = 20;
const PERIOD_MS = 30_000;
const SECRET = 'peer-kill-federation-secret';

describe("a peer region's Redis killed and restarted empty", () => {
  let redisA: RedisProcess;
  let redisB: RedisProcess;
  let a: RegionService;
  let b: RegionService;

  const start = (name: string, own: RedisProcess, peerName: string, peer: RedisProcess) =>
    startRegionService(
      parseConfig({
        region: name,
        port: 0,
        redis: { url: own.url, commandTimeoutMs: 250, connectTimeoutMs: 500 },
        breaker: { failureThreshold: 3, probeIntervalMs: 100, successThreshold: 1, localFallback: true },
        federation: {
          syncIntervalMs: 50,
          leakageBudget: 0,
          secret: SECRET,
          maxClockSkewMs: 200,
          peers: [{ name: peerName, redisUrl: peer.url }],
        },
        rules: [{ name: 'probe', by: ['apiKey'], algorithm: 'fixedWindow', limit: LIMIT, period: PERIOD_MS, failMode: 'closed' }],
      }),
      { logger: silentLogger() },
    );

  beforeAll(async () => {
    [redisA, redisB] = await Promise.all([startRedis(), startRedis()]);
    a = await start('a', redisA, 'b', redisB);
    b = await start('b', redisB, 'a', redisA);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await redisA?.stop();
    await redisB?.stop();
  });

  const ask = async (service: RegionService) =>
    (await service.engine.decide({ apiKey: 'hot', ip: '10.0.0.1', method: 'GET', path: '/x' })).allowed;
  const burst = async (service: RegionService, count: number) => {
    let admitted = 0;
    for (let i = 0; i < count; i++) if (await ask(service)) admitted++;
    return admitted;
  };

  it('keeps the federation window within limit + budget', async () => {
    await awayFromWindowEdge(PERIOD_MS, 12_000);
    let admitted = await burst(b, 15); // b's share: 10
    admitted += await burst(a, 5);

    await redisB.kill('SIGKILL');
    await eventually(
      async () => {
        admitted += await burst(b, 1);
        return b.engine.breaker.state === 'open';
      },
      5_000,
      "b's breaker to open",
    );
    admitted += await burst(b, 20);
    admitted += await burst(a, 5);

    await redisB.restart();
    await eventually(async () => b.engine.breaker.state === 'closed', 10_000, "b's breaker to close");
    for (let round = 0; round < 10; round++) {
      admitted += await burst(b, 5);
      admitted += await burst(a, 5);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.info(JSON.stringify({ probe: 'peer-redis-kill', admitted, bound: LIMIT }));
    expect(admitted).toBeLessThanOrEqual(LIMIT);
  });
});

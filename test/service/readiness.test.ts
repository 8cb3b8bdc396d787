// /readyz against a real redis-server that is killed and frozen: an instance that can answer by its fail modes
// stays ready (every instance of a region shares that Redis; a balancer must not drain them all), with Redis's
// health in the body and in quotafed_redis_up; `readiness.requireRedis` turns it into a 503 with a reason that says
// what failed and where.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { eventually, metricValue, seedConfig } from './fixtures.ts';

interface ReadyBody {
  status: string;
  reasons?: string[];
  redis: { url: string; up: boolean; error?: string };
  breaker: string;
  mode: string;
}

describe('/readyz', async () => {
  const redis = await useRedis();
  let lenient: RegionService;
  let strict: RegionService;

  const start = (requireRedis: boolean) =>
    startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.region = requireRedis ? 'strict' : 'lenient';
        raw.redis = { url: redis.url, commandTimeoutMs: 300, connectTimeoutMs: 500 };
        raw.breaker = { failureThreshold: 2, probeIntervalMs: 100 };
        if (requireRedis) raw.readiness = { requireRedis: true };
      }),
      { federation: false, dashboard: false },
    );
  beforeAll(async () => {
    lenient = await start(false);
    strict = await start(true);
  });
  afterAll(async () => {
    await lenient?.close();
    await strict?.close();
  });

  const ready = async (service: RegionService) => {
    const res = await fetch(`${service.url}/readyz`);
    return { status: res.status, body: (await res.json()) as ReadyBody };
  };
  const redisUpMetric = async (service: RegionService) =>
    metricValue(await (await fetch(`${service.url}/metrics`)).text(), 'quotafed_redis_up');

  it('is ready with Redis up, and says so in the body and the metric', async () => {
    for (const service of [lenient, strict]) {
      const { status, body } = await ready(service);
      expect(status).toBe(200);
      expect(body).toMatchObject({ status: 'ready', redis: { url: redis.url, up: true }, breaker: 'closed' });
      expect(await redisUpMetric(service)).toBe(1);
    }
    expect((await ready(lenient)).body.mode).toBe('failModes');
    expect((await ready(strict)).body.mode).toBe('requireRedis');
  });

  it('stays ready while Redis is down (fail modes answer); strict mode answers 503 naming the address and the error', async () => {
    await redis.kill('SIGKILL');
    try {
      // Decisions follow the fail modes meanwhile, and open the breaker.
      for (let i = 0; i < 3; i++) await fetch(`${lenient.url}/v1/check`, { method: 'POST', body: '{"method":"GET","path":"/x"}' });
      const down = await ready(lenient);
      expect(down.status).toBe(200);
      expect(down.body.status).toBe('ready');
      expect(down.body.redis).toEqual({ url: redis.url, up: false, error: `cannot reach ${redis.url}: ECONNREFUSED` });
      expect(await redisUpMetric(lenient)).toBe(0);

      const refused = await ready(strict);
      expect(refused.status).toBe(503);
      expect(refused.body.status).toBe('not ready');
      expect(refused.body.reasons).toContain(`cannot reach ${redis.url}: ECONNREFUSED`);
      expect(refused.body.reasons!.join(' ')).not.toMatch(/Stream isn't writeable|enableOfflineQueue/);
    } finally {
      await redis.restart();
    }
    await eventually(async () => (await ready(strict)).status === 200, 20_000, 'the strict instance to be ready again');
    await eventually(async () => (await ready(lenient)).body.redis.up, 20_000, 'the lenient instance to reconnect');
  });

  it('names a frozen Redis (SIGSTOP) by the PING it did not answer', async () => {
    process.kill(redis.pid!, 'SIGSTOP');
    try {
      const frozen = await ready(lenient);
      expect(frozen.status).toBe(200);
      expect(frozen.body.redis.error).toBe(`${redis.url} did not answer PING within 300 ms`);
      const refused = await ready(strict);
      expect(refused.status).toBe(503);
      expect(refused.body.reasons).toContain(`${redis.url} did not answer PING within 300 ms`);
    } finally {
      process.kill(redis.pid!, 'SIGCONT');
    }
    await eventually(async () => (await ready(strict)).status === 200, 20_000, 'the strict instance to be ready again');
  });
});

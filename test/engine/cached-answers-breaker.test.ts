// An answer from memory (the over-limit cache) is no Redis round trip: it neither counts as a success of Redis for the
// breaker nor is timed as a `decide` round trip in quotafed_redis_command_duration_seconds. Against a real
// redis-server frozen with SIGSTOP, an abusive key answered from the cache hundreds of times for every decision that
// times out must not keep the breaker closed (it would dilute the failure ratio below `failureRatio`, and every request
// that needs Redis would wait out its deadline for as long as the abuse goes on).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { silentLogger } from '../../src/log.ts';
import { redisCommandSeconds } from '../../src/metrics.ts';
import { useFreezableRedis } from '../support/freezable-redis.ts';

const frozen = useFreezableRedis();

/** How many `decide` round trips the histogram has timed so far. */
async function decideRoundTrips(): Promise<number> {
  const metric = await redisCommandSeconds.get();
  return metric.values.find((v) => v.metricName?.endsWith('_count') && v.labels.command === 'decide')?.value ?? 0;
}

describe('answers from the over-limit cache', () => {
  it('are neither breaker successes nor timed round trips: a frozen Redis opens the breaker under a flood of cached denials', async () => {
    const server = await frozen.start();
    const config = parseConfig({
      region: 'us-east',
      // The defaults of the breaker: at least 5 failures in 10 s, and more than half of the calls.
      redis: { url: server.url, commandTimeoutMs: 50 },
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 2, period: '1h', failMode: 'closed' }],
    });
    const redis = await frozen.connect(config);
    const engine = createResilientEngine({
      config,
      inner: createRedisEngine({ config, redis }),
      probe: () => redis.ping(),
      logger: silentLogger(),
    });
    const abusive = { apiKey: 'abusive', ip: '203.0.113.1', method: 'GET', path: '/' };
    const tripsBefore = await decideRoundTrips();
    for (let i = 0; i < 3; i++) await engine.decide(abusive);
    const cached = await engine.decide(abusive);
    expect(cached.allowed).toBe(false);
    expect(cached.outcomes[0]!.source).toBe('cache');
    // Three decisions went to Redis; the fourth was answered from memory and is not timed as a round trip.
    expect((await decideRoundTrips()) - tripsBefore).toBe(3);

    frozen.freeze();
    let timedOut = 0;
    for (let round = 0; round < 12 && engine.breaker.state === 'closed'; round++) {
      for (let i = 0; i < 200; i++) expect((await engine.decide(abusive)).outcomes[0]!.source).toBe('cache');
      const fresh = await engine.decide({ apiKey: `fresh-${round}`, ip: '203.0.113.2', method: 'GET', path: '/' });
      expect(fresh.outcomes[0]!.source).not.toBe('redis');
      timedOut++;
    }
    // 2,000 cached denials beside a handful of timed-out calls: the calls that reached Redis failed, so it opens.
    expect(engine.breaker.state).toBe('open');
    expect(timedOut).toBeGreaterThanOrEqual(5);
    expect(timedOut).toBeLessThan(12);
    expect((await decideRoundTrips()) - tripsBefore).toBe(3 + timedOut);
    await engine.close?.();
  });
});

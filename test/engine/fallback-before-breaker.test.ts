// A fail-open rule that opts into the local fallback counts every degraded admission there, from the first timed-out
// decision, not only once the breaker has opened: against a real redis-server frozen with SIGSTOP, with a breaker
// that stays closed, the rule admits its local share and no more, and what it admitted is written to Redis after
// the next decision Redis answers.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { silentLogger } from '../../src/log.ts';
import { useFreezableRedis } from '../support/freezable-redis.ts';
import { eventually } from '../support/wait.ts';

const LIMIT = 10;
const frozen = useFreezableRedis();

describe('the local fallback before the breaker opens', () => {
  it('a timed-out decision of a fail-open rule with the fallback is counted there, and settled later', async () => {
    const server = await frozen.start();
    const config = parseConfig({
      region: 'us-east',
      redis: { url: server.url, commandTimeoutMs: 50 },
      // The breaker never opens in this test: every degraded decision below is taken with it closed.
      breaker: { failureThreshold: 10_000, localFallback: true, localFallbackStart: 'atOnce' },
      rules: [{ name: 'fo', by: ['apiKey'], algorithm: 'fixedWindow', limit: LIMIT, period: '1h', failMode: 'open' }],
    });
    const redis = await frozen.connect(config);
    const engine = createResilientEngine({
      config,
      inner: createRedisEngine({ config, redis, overLimitCache: false }),
      probe: () => redis.ping(),
      logger: silentLogger(),
    });
    const request = { apiKey: 'frozen', ip: '203.0.113.1', method: 'GET', path: '/' };
    expect((await engine.decide(request)).allowed).toBe(true); // Redis decides: 1 of 10

    frozen.freeze();
    const degraded = [];
    for (let i = 0; i < 3 * LIMIT; i++) degraded.push(await engine.decide(request));
    expect(engine.breaker.state).toBe('closed');
    const admitted = degraded.filter((decision) => decision.allowed).length;
    // The single region's local share is the whole limit: 10 (before, every one of the 30 was a plain fail-open).
    expect(admitted).toBe(LIMIT);
    expect(degraded.every((decision) => decision.outcomes[0]!.source === 'local-fallback')).toBe(true);

    frozen.thaw();
    // The next decision Redis answers settles the local admissions into the window: 1 + 10 = 11 > 10, denied after.
    await eventually(async () => (await engine.decide(request)).outcomes[0]!.source === 'redis', 5_000, 'Redis to decide again');
    await eventually(
      async () => {
        const decision = await engine.decide(request);
        return decision.outcomes[0]!.source === 'redis' && !decision.allowed;
      },
      5_000,
      'the settled admissions to count in Redis',
    );
    await engine.close?.();
  });
});

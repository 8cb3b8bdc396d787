// quotafed_near_limit_total{rule} counts admissions that used at least 80% of the rule's limit, as the headers report
// it: in a federation, of the federation's limit (the remaining quota X-RateLimit-Remaining shows), not of this
// region's share. A real federated region on a real redis-server (its peers are never asked for a decision).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { recordDecision } from '../../src/engine/decision-metrics.ts';
import type { Decision } from '../../src/engine/types.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { remainingOf } from '../../src/http/headers.ts';
import { nearLimitTotal } from '../../src/metrics.ts';
import { withScripts } from '../../src/store/commands.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = withScripts(client(server.url));

const nearLimit = async (rule: string) => (await nearLimitTotal.get()).values.find((v) => v.labels.rule === rule)?.value ?? 0;

describe('quotafed_near_limit_total', () => {
  it('counts against the limit the headers report: a federated region near its share is not near the limit', async () => {
    const config = parseConfig({
      region: 'us-east',
      federation: {
        leakageBudget: 0,
        peers: [
          { name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' },
          { name: 'ap-south', redisUrl: 'redis://127.0.0.1:2' },
        ],
      },
      rules: [{ name: 'fed-fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 300, period: '1h' }],
    });
    await markShardsIntact(redis);
    const engine = createRedisEngine({ config, redis, overLimitCache: false });
    const request = { apiKey: 'near', ip: '10.0.0.1', method: 'GET', path: '/' };
    // 90 of this region's share of 100: the region has 10 left, the federation (as this region sees it) 210.
    let last: Decision | undefined;
    for (let i = 0; i < 90; i++) {
      last = await engine.decide(request);
      expect(last.allowed).toBe(true);
      recordDecision(last, 'other');
    }
    const outcome = last!.outcomes[0]!;
    expect(outcome.remaining).toBe(10);
    expect(remainingOf(outcome)).toBe(210);
    expect(await nearLimit('fed-fw')).toBe(0);
    await engine.close?.();
  });

  it('counts a standalone region’s admissions from 80% of the limit on', async () => {
    const config = parseConfig({
      region: 'us-east',
      rules: [{ name: 'solo-fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 10, period: '1h' }],
    });
    const engine = createRedisEngine({ config, redis, overLimitCache: false });
    for (let i = 0; i < 10; i++) recordDecision(await engine.decide({ apiKey: 'solo', ip: '10.0.0.1', method: 'GET', path: '/' }), 'other');
    // The 8th, 9th and 10th admissions leave 2, 1 and 0 of 10: used 80% or more.
    expect(await nearLimit('solo-fw')).toBe(3);
    await engine.close?.();
  });
});

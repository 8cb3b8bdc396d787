// One child process of the 50-gateway test: N gateway engines, each with its own Redis connection, hammer
// one API key in a closed loop once the parent says go. Run with `node --import tsx`.
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';

export interface WorkerResult {
  worker: number;
  engine: number;
  /** Wall-clock ms with sub-ms precision (wallClock below), comparable across processes on one host. */
  sentAt: number;
  returnedAt: number;
  allowed: boolean;
  error?: string;
}

const [workerId, engineCount, perEngine] = process.argv.slice(2).map(Number) as [number, number, number];
const config = parseConfig(JSON.parse(process.env.QUOTAFED_TEST_CONFIG!));
/**
 * Wall-clock ms with sub-ms precision: the monotonic clock anchored to the wall clock at the edge of a Date.now()
 * tick, taken when the parent says go. (performance.timeOrigin is read once at process start, when five processes
 * starting on two busy cores can each be preempted between its two clock reads: the processes' clocks then differed
 * by more than the 5 ms the cross-process check allows, with every admission in Redis order.)
 */
function wallClock(): () => number {
  const start = Date.now();
  let tick = start;
  while (tick === start) tick = Date.now();
  const anchor = tick - performance.now();
  return () => anchor + performance.now();
}

const gateways = await Promise.all(
  Array.from({ length: engineCount }, async () => {
    const redis = createRegionRedis(config);
    await waitReady(redis);
    return { redis, engine: createRedisEngine({ config, redis, overLimitCache: false }) };
  }),
);

process.send!({ type: 'ready' });
process.once('message', async () => {
  const clock = wallClock();
  const results: WorkerResult[] = [];
  await Promise.all(
    gateways.map(async ({ engine }, index) => {
      for (let i = 0; i < perEngine; i++) {
        const sentAt = clock();
        try {
          const decision = await engine.decide({ apiKey: 'hot-key', ip: '198.51.100.1', method: 'GET', path: '/v1/charges' });
          results.push({ worker: workerId, engine: index, sentAt, returnedAt: clock(), allowed: decision.allowed });
        } catch (error) {
          results.push({ worker: workerId, engine: index, sentAt, returnedAt: clock(), allowed: false, error: (error as Error).message });
        }
      }
    }),
  );
  process.send!({ type: 'results', results }, () => {
    for (const { redis } of gateways) redis.disconnect();
    process.exit(0);
  });
});

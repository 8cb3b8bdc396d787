// A region without federation started with a rule redefined under its name since its last start (issue 21, item
// 2): it has no fence to put on the window, so it says so in one log line, naming the rule and what it starts
// from, and records the rules it runs. An unchanged restart says nothing.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startRegionService } from '../../src/service.ts';
import { client, useRedis } from '../harness/redis.ts';
import { captureLog } from './fixtures.ts';

const server = await useRedis();
const redis = client(server.url);

const configWith = (algorithm: string, period: string) =>
  parseConfig({
    region: 'solo',
    port: 0,
    redis: { url: server.url },
    rules: [{ name: 'fw', by: ['apiKey'], algorithm, limit: 3, period }],
  });

async function startAndStop(algorithm: string, period: string) {
  const log = captureLog();
  const service = await startRegionService(configWith(algorithm, period), { logger: log.logger, dashboard: false });
  const response = await fetch(`${service.url}/v1/check`, {
    method: 'POST',
    body: JSON.stringify({ apiKey: 'k', method: 'GET', path: '/' }),
  });
  expect(response.status).toBe(200);
  await service.close();
  return log.lines().filter((line) => line.event === 'rules.redefined');
}

describe('a region without federation and a redefined rule', () => {
  it('says so once at start-up and records the rules it runs', async () => {
    expect(await startAndStop('fixedWindow', '1m')).toEqual([]);
    expect(JSON.parse((await redis.get('qf:meta:rules'))!)).toEqual({ fw: 'fixedWindow/60000' });
    expect(await startAndStop('fixedWindow', '1m')).toEqual([]);

    const lines = await startAndStop('tokenBucket', '30s');
    expect(lines).toHaveLength(1);
    expect(lines[0]!.msg).toContain('"fw" (fixedWindow/60000 -> tokenBucket/30000)');
    expect(JSON.parse((await redis.get('qf:meta:rules'))!)).toEqual({ fw: 'tokenBucket/30000' });
    expect(await startAndStop('tokenBucket', '30s')).toEqual([]);
  });
});

// rules[].countResponses through the gateway, with a real upstream and a real redis-server: a rule that counts
// only failed answers lets successful requests through without spending its limit, and one that counts only
// successful answers is not spent by the upstream's errors; the refunds are counted.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, eventually } from './fixtures.ts';

describe('countResponses', async () => {
  const redis = await useRedis();
  let upstream: Server;
  let service: RegionService;

  beforeAll(async () => {
    // 500 on /broken/..., 200 elsewhere.
    upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(req.url?.startsWith('/broken') ? 500 : 200, { 'Content-Type': 'text/plain' });
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const config = parseConfig({
      region: 'solo',
      port: 0,
      logLevel: 'silent',
      redis: { url: redis.url },
      upstream: { url: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` },
      rules: [
        {
          name: 'failures',
          match: { identity: 'apiKey', endpoints: ['/broken/*', '/fine/*'] },
          by: ['apiKey'],
          algorithm: 'fixedWindow',
          limit: 3,
          period: '1m',
          countResponses: 'failed',
        },
        {
          name: 'served',
          match: { identity: 'apiKey', endpoints: ['/served/*', '/broken-served/*'] },
          by: ['apiKey'],
          algorithm: 'tokenBucket',
          limit: 2,
          period: '1m',
          countResponses: 'successful',
        },
      ],
    });
    service = await startRegionService(config, { dashboard: false, federation: false });
  });
  afterAll(async () => {
    await service?.close();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  const get = (path: string, apiKey: string) => fetch(`${service.url}${path}`, { headers: { 'X-API-Key': apiKey } });
  const metric = async () => {
    const text = await (await fetch(`${service.url}/metrics`)).text();
    return text.split('\n').filter((line) => line.startsWith('quotafed_response_refunds_total'));
  };

  it('counts only failed answers: successful requests never spend the limit, the fourth failure is refused', async () => {
    await awayFromWindowEdge(60_000, 8_000);
    // Ten successful answers, each refunded after the fact (a refund lands just after its answer: one at a time).
    for (let i = 0; i < 10; i++) {
      expect((await get('/fine/x', 'key-1')).status).toBe(200);
      await eventually(async () =>
        expect((await metric()).some((line) => line.includes('rule="failures"') && line.endsWith(` ${i + 1}`))).toBe(true),
      );
    }
    expect((await get('/broken/x', 'key-1')).status).toBe(500);
    expect((await get('/broken/x', 'key-1')).status).toBe(500);
    expect((await get('/broken/x', 'key-1')).status).toBe(500);
    const refused = await get('/broken/x', 'key-1');
    expect(refused.status).toBe(429);
    // The limit is spent by failures: a successful request is refused too now (its answer is not known before).
    expect((await get('/fine/x', 'key-1')).status).toBe(429);
  });

  it('counts only successful answers: the upstream errors do not spend the bucket', async () => {
    const refunds = async () =>
      (await metric()).filter((line) => line.includes('rule="served"')).reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
    for (let i = 0; i < 6; i++) {
      expect((await get('/broken-served/x', 'key-2')).status).toBe(500);
      await eventually(async () => expect(await refunds()).toBe(i + 1));
    }
    expect((await get('/served/x', 'key-2')).status).toBe(200);
    expect((await get('/served/x', 'key-2')).status).toBe(200);
    expect((await get('/served/x', 'key-2')).status).toBe(429);
  });
});

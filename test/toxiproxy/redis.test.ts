// A real redis-server behind the proxy, used through ioredis: the chaos lab's setup in miniature.
import { Redis } from 'ioredis';
import { performance } from 'node:perf_hooks';
import type { Latency, Timeout } from 'toxiproxy-node-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { eventually } from '../support/wait.ts';
import { portOf, proxyTo, useToxiproxy } from './helpers.ts';

const tp = useToxiproxy();
let redis: RedisProcess;
const clients: Redis[] = [];

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await redis.stop();
});

function redisVia(listen: string): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port: portOf(listen),
    maxRetriesPerRequest: 1,
    commandTimeout: 400,
    retryStrategy: () => 25,
  });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

async function timed<T>(work: () => Promise<T>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

/** Polls until `check` succeeds; bounded in time. */
function succeeds(check: () => Promise<unknown>, ms = 5_000): Promise<true> {
  return eventually(
    async () => {
      await check();
      return true as const;
    },
    ms,
    'the call to succeed',
  );
}

describe('redis-server behind the toxiproxy server', { timeout: 20_000 }, () => {
  it('proxies commands, adds latency, fails while disabled and recovers when enabled', async () => {
    const proxy = await proxyTo(tp.client, 'us-east->eu-west', `127.0.0.1:${redis.port}`);
    const viaProxy = redisVia(proxy.listen);
    const direct = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    clients.push(direct);

    await viaProxy.set('toxiproxy:k', 'v1');
    expect(await direct.get('toxiproxy:k')).toBe('v1');

    const latency = await proxy.addToxic<Latency>({
      name: 'lag',
      type: 'latency',
      stream: 'downstream',
      toxicity: 1,
      attributes: { latency: 100, jitter: 0 },
    });
    expect(await timed(() => viaProxy.ping())).toBeGreaterThanOrEqual(90);
    await latency.remove();
    expect(await viaProxy.get('toxiproxy:k')).toBe('v1');

    const disabled = await proxy.update({ enabled: false, listen: proxy.listen, upstream: proxy.upstream });
    await expect(viaProxy.set('toxiproxy:k', 'v2')).rejects.toThrow();
    expect(await direct.get('toxiproxy:k')).toBe('v1');

    await disabled.update({ enabled: true, listen: disabled.listen, upstream: disabled.upstream });
    await succeeds(() => viaProxy.set('toxiproxy:k', 'v3'));
    expect(await direct.get('toxiproxy:k')).toBe('v3');
  });

  it('a timeout toxic makes commands time out until it is removed', async () => {
    const proxy = await proxyTo(tp.client, 'partition', `127.0.0.1:${redis.port}`);
    const viaProxy = redisVia(proxy.listen);
    expect(await viaProxy.ping()).toBe('PONG');
    const cut = await proxy.addToxic<Timeout>({
      name: 'cut',
      type: 'timeout',
      stream: 'upstream',
      toxicity: 1,
      attributes: { timeout: 0 },
    });
    await expect(viaProxy.ping()).rejects.toThrow(/timed out/i);
    await cut.remove();
    await succeeds(() => viaProxy.ping());
    expect(await viaProxy.ping()).toBe('PONG');
  });
});

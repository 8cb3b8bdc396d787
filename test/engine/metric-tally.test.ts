// The decision counters are kept in a tally on the decision path (src/metric-tally.ts) and added to prom-client as
// the registry is read: a scrape shows every decision made before it, once, whatever the reads in between. Real
// decisions of the resilient engine (what the service, the middleware and Envoy's RLS decide through) on a real
// redis-server, read as /metrics reads them (the registry's text).
import { Redis } from 'ioredis';
import { Counter, Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { sumOf } from '../../bench/lib/prom-text.ts';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { silentLogger } from '../../src/log.ts';
import { createTally } from '../../src/metric-tally.ts';
import { registry } from '../../src/metrics.ts';
import { useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = new Redis(server.url);
afterAll(() => redis.quit());

const decisions = async (where: Record<string, string>) => sumOf(await registry.metrics(), 'quotafed_decisions_total', where);

describe('decision counters kept in a tally', () => {
  it('show every decision made before a read, once, on every read after it', async () => {
    const config = parseConfig({
      region: 'us-east',
      redis: { url: server.url },
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 3, period: '1h' }],
    });
    const engine = createResilientEngine({
      config,
      inner: createRedisEngine({ config, redis }),
      probe: () => redis.ping(),
      logger: silentLogger(),
    });
    const request = (apiKey: string) => ({ apiKey, ip: '203.0.113.1', method: 'GET', path: '/' });
    const near = async () => sumOf(await registry.metrics(), 'quotafed_near_limit_total');
    const before = {
      allowed: await decisions({ outcome: 'allowed' }),
      limited: await decisions({ outcome: 'limited' }),
      near: await near(),
    };
    for (let i = 0; i < 5; i++) await engine.decide(request('tally-key'));
    expect(await decisions({ outcome: 'allowed' })).toBe(before.allowed + 3);
    expect(await decisions({ outcome: 'limited' })).toBe(before.limited + 2);
    // A second read adds nothing; decisions after it are added on the next.
    expect(await decisions({ outcome: 'allowed' })).toBe(before.allowed + 3);
    await engine.decide(request('tally-key-2'));
    expect(await decisions({ outcome: 'allowed' })).toBe(before.allowed + 4);
    // Near the limit (at most 20% of it left): the third admission of 3, alone.
    expect(await near()).toBe(before.near + 1);
    await engine.close?.();
  });

  it('hands each label set its own count, through counter.get() as through the text', async () => {
    const tally = createTally(['rule', 'source'] as const);
    const own = new Registry();
    const counter = new Counter({
      name: 't_total',
      help: 't',
      labelNames: ['rule', 'source'] as const,
      registers: [own],
      collect() {
        tally.drainInto(this);
      },
    });
    tally.add({ rule: 'a', source: 'redis' });
    tally.add({ rule: 'a', source: 'cache' }, 2);
    tally.add({ rule: 'b', source: 'redis' });
    tally.add({ rule: 'a', source: 'redis' });
    const values = (await counter.get()).values.map(({ labels, value }) => [labels.rule, labels.source, value]);
    expect(values.sort()).toEqual([
      ['a', 'cache', 2],
      ['a', 'redis', 2],
      ['b', 'redis', 1],
    ]);
    tally.add({ rule: 'b', source: 'redis' }, 3);
    expect(sumOf(await own.metrics(), 't_total', { rule: 'b' })).toBe(4);
    expect(sumOf(await own.metrics(), 't_total')).toBe(8);
    expect(() => createTally([])).toThrow(/at least one label/);
  });
});

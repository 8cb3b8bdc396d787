// The top-keys sketches fed by real decisions (a real redis-server, the clocks pinned): denials and consumption
// per rule, a request denied by one rule consuming from none, shadow denials counted, the window rolling over, a
// policy reload dropping a removed rule, and API keys masked unless asked otherwise.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { maskApiKey } from '../../src/engine/top-keys.ts';
import { silentLogger } from '../../src/log.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);
const MINUTE = 60_000;

function engineAt(clock: { now: number }, patch: Partial<ConfigInput> = {}) {
  const config = parseConfig({
    region: 'us-east',
    redis: { url: server.url, commandTimeoutMs: 2_000 },
    rules: [
      { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 3, period: '1m' },
      {
        name: 'checkout',
        match: { endpoints: ['/checkout'] },
        by: ['apiKey', 'endpoint'],
        algorithm: 'fixedWindow',
        limit: 1,
        period: '1m',
      },
      { name: 'dry-run', by: ['ip'], algorithm: 'fixedWindow', limit: 1, period: '1m', shadow: true },
    ],
    ...patch,
  });
  // The over-limit cache would answer repeated denials from memory: they must be counted all the same.
  const inner = createRedisEngine({ config, redis, nowMs: () => clock.now });
  return {
    config,
    engine: createResilientEngine({ config, inner, probe: () => redis.ping(), logger: silentLogger(), now: () => clock.now }),
  };
}

const request = (apiKey: string, path = '/items', ip = '10.0.0.1') => ({ apiKey, ip, method: 'GET', path });

describe('top keys per rule', () => {
  it('counts denials and admitted cost per key, in the rule window of the decision', async () => {
    await redis.flushall();
    const clock = { now: Date.UTC(2030, 0, 1, 12, 0, 5) };
    const { config, engine } = engineAt(clock);
    const [perKey, checkout, dryRun] = config.rules;
    for (let i = 0; i < 10; i++) await engine.decide(request('hot-customer-0001'));
    for (let i = 0; i < 4; i++) await engine.decide(request('warm-customer-0002', '/items', '10.0.0.2'));
    await engine.decide({ ...request('big-spender-00003', '/items', '10.0.0.3'), cost: 3 });
    // /checkout: the second request is denied by checkout alone; per-key consumes nothing for it.
    await engine.decide(request('buyer-customer-04', '/checkout', '10.0.0.4'));
    await engine.decide(request('buyer-customer-04', '/checkout', '10.0.0.4'));

    const denials = engine.topKeys!.top(perKey!, 'denials', 10, 'current', clock.now);
    expect(denials.entries.map(({ key, count, error }) => ({ key, count, error }))).toEqual([
      { key: maskApiKey('hot-customer-0001', denials.entries[0]!.id), count: 7, error: 0 },
      { key: maskApiKey('warm-customer-0002', denials.entries[1]!.id), count: 1, error: 0 },
    ]);
    expect(denials.entries[0]!.key).toMatch(/^hot-…#[\w-]{6}$/);
    expect(denials.total).toBe(8);
    expect(denials.window).toEqual({
      which: 'current',
      startMs: Date.UTC(2030, 0, 1, 12, 0),
      endMs: Date.UTC(2030, 0, 1, 12, 1),
      periodMs: MINUTE,
    });

    const consumption = engine.topKeys!.top(perKey!, 'consumption', 10, 'current', clock.now);
    expect(Object.fromEntries(consumption.entries.map((entry) => [entry.key.slice(0, 4), entry.count]))).toEqual({
      'hot-': 3,
      warm: 3,
      'big-': 3,
      buye: 1,
    });
    expect(consumption.total).toBe(10);

    const checkoutDenials = engine.topKeys!.top(checkout!, 'denials', 10, 'current', clock.now);
    expect(checkoutDenials.entries).toHaveLength(1);
    expect(checkoutDenials.entries[0]!.key).toMatch(/^buye…#[\w-]{6} \/checkout$/);
    // The shadow rule denies without rejecting: its would-be denials are what a rollout wants to see. Requests 2-4
    // of 10.0.0.1 were decided by Redis (shadow denials); 5-10 came from the over-limit cache, which answers for the
    // per-key rule alone, so only the rule it holds counts them.
    const shadow = engine.topKeys!.top(dryRun!, 'denials', 10, 'current', clock.now);
    expect(shadow.entries.find((entry) => entry.key === '10.0.0.1')?.count).toBe(3);

    // The next window starts empty; the one before stays readable until the window after it.
    clock.now += MINUTE;
    expect(engine.topKeys!.top(perKey!, 'denials', 10, 'current', clock.now).entries).toEqual([]);
    const previous = engine.topKeys!.top(perKey!, 'denials', 10, 'previous', clock.now);
    expect(previous.entries[0]).toMatchObject({ count: 7 });
    expect(previous.window.startMs).toBe(Date.UTC(2030, 0, 1, 12, 0));
    await engine.decide(request('next-window-00005'));
    expect(engine.topKeys!.top(perKey!, 'consumption', 10, 'current', clock.now).entries).toMatchObject([{ count: 1 }]);
    clock.now += 2 * MINUTE;
    expect(engine.topKeys!.top(perKey!, 'consumption', 10, 'previous', clock.now).entries).toEqual([]);

    // A reload that removes a rule drops its sketches.
    const next = parseConfig({ ...config, rules: [config.rules[0]!] } as ConfigInput);
    await engine.swap({ config: next, inner: createRedisEngine({ config: next, redis, nowMs: () => clock.now }) });
    expect(engine.topKeys!.top(dryRun!, 'denials', 10, 'previous', clock.now - 2 * MINUTE).entries).toEqual([]);
    await engine.close();
  });

  it('shows API keys in full with apiKeys: plain, and keeps no sketch with enabled: false', async () => {
    await redis.flushall();
    const clock = { now: Date.UTC(2030, 0, 1, 12, 0, 5) };
    const plain = engineAt(clock, { topKeys: { apiKeys: 'plain' } });
    for (let i = 0; i < 5; i++) await plain.engine.decide(request('hot-customer-0001'));
    expect(plain.engine.topKeys!.top(plain.config.rules[0]!, 'denials', 1, 'current', clock.now).entries[0]).toMatchObject({
      key: 'hot-customer-0001',
      count: 2,
    });
    await plain.engine.close();
    const off = engineAt(clock, { topKeys: { enabled: false } });
    expect(off.engine.topKeys).toBeUndefined();
    expect((await off.engine.decide(request('hot-customer-0001'))).allowed).toBe(false);
    await off.engine.close();
  });
});

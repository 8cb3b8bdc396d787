import { describe, expect, it } from 'vitest';
import { concurrency, createLimiter, fixedWindow, tokenBucket } from '../../src/index.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);

describe('createLimiter (the five-line API)', () => {
  it('limits an identifier with an algorithm value', async () => {
    const limiter = createLimiter({ redis, limit: fixedWindow(3, '1m') });
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await limiter.limit('customer-42'));
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, false]);
    expect(results[3]!.remaining).toBe(0);
    expect(results[3]!.retryAfterMs).toBeGreaterThan(0);
    expect((await limiter.limit('customer-43')).allowed).toBe(true);
  });

  it('charges a cost against a token bucket', async () => {
    const limiter = createLimiter({ redis, name: 'tb', limit: tokenBucket(10, '1m') });
    expect((await limiter.limit('c', { cost: 7 })).remaining).toBe(3);
    expect((await limiter.limit('c', { cost: 4 })).allowed).toBe(false);
  });

  it('decides a hot identifier from a local lease and gives the rest back on close', async () => {
    const limiter = createLimiter({ redis, name: 'leased', limit: fixedWindow(100, '1h'), lease: { size: 20, ttlMs: 60_000 } });
    const sources = [];
    for (let i = 0; i < 5; i++) sources.push((await limiter.limit('hot-caller')).decision.binding!.source);
    expect(sources).toEqual(['redis', 'redis', 'lease', 'lease', 'lease']);
    // Two calls and a lease of 20 were counted in Redis (a peek answers what would be left after one more call); the
    // lease's 17 unspent units go back on close.
    const peeked = await limiter.peek('hot-caller');
    expect(peeked.remaining).toBe(100 - 2 - 20 - 1);
    await limiter.close();
    expect((await limiter.peek('hot-caller')).remaining).toBe(100 - 5 - 1);
  });

  it('hands out concurrency leases to release', async () => {
    const limiter = createLimiter({ redis, name: 'cc', limit: concurrency(1, { leaseTtl: '10s' }) });
    const first = await limiter.limit('job');
    expect((await limiter.limit('job')).allowed).toBe(false);
    await limiter.release(first.leases);
    expect((await limiter.limit('job')).allowed).toBe(true);
  });
});

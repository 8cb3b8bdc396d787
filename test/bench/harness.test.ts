// The bench harness end to end in a tiny configuration: the command-count section against a real
// redis-server (its figures are exact counts, not timings), the targets table built from them, and one
// server the HTTP bench spawns (the service under node:cluster) answering and stopping cleanly.
import { openSync, writeSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { BenchContext } from '../../bench/lib/context.ts';
import { keyDraw } from '../../bench/lib/key-draw.ts';
import { processIo, runLoad, startServer } from '../../bench/lib/processes.ts';
import { histogramBuckets, quantileBetween, sumOf } from '../../bench/lib/prom-text.ts';
import { recordSpread, spreadOf } from '../../bench/lib/stats.ts';
import { renderTable } from '../../bench/lib/table.ts';
import { commandsSection } from '../../bench/sections/commands.ts';
import { federationSizes, roundSpread } from '../../bench/sections/federation.ts';
import { targetsTable } from '../../bench/sections/targets.ts';
import { client, useRedis } from '../harness/redis.ts';

const devNull = openSync('/dev/null', 'w');
const server = await useRedis();
const admin = client(server.url);

const ctx: BenchContext = {
  options: { quick: true, only: [] },
  redisServer: server,
  admin,
  figures: {},
  ms: (_full, quick) => quick,
};

describe('bench harness', () => {
  it('counts one round trip per decision on the allow and deny paths, fewer when batched, and none from the over-limit cache', async () => {
    const tables = await commandsSection(ctx);
    expect(tables[0]!.rows).toHaveLength(6);
    expect(ctx.figures['commands.allow.perDecision']).toBe(1);
    // 64 submitted together: the first alone, the other 63 in one call.
    expect(ctx.figures['commands.batched.perDecision']).toBeLessThan(0.1);
    expect(ctx.figures['commands.deny.perDecision']).toBe(1);
    expect(ctx.figures['commands.cache.perDecision']).toBe(0);
    expect(ctx.figures['commands.multi.perDecision']).toBe(1);
    const targets = targetsTable(ctx.figures);
    const rows = Object.fromEntries(targets.rows.map((row) => [row.target, row.result]));
    expect(rows['4. no Redis command when the over-limit cache answers an abusive key']).toBe('PASS');
    expect(rows['4. at most one Redis round trip per decision: 64 submitted together (batched)']).toBe('PASS');
    expect(rows['1. /v1/check >= 1.0x Hono + rate-limiter-flexible, same route and body, fresh API key per request']).toBe('–');
    expect(renderTable(targets)).toContain('| target | measured | result |');
  }, 30_000);

  it("counts a process's write system calls and wake-ups from /proc (the federation section's per-decision rows)", async () => {
    const before = processIo(process.pid)!;
    for (let i = 0; i < 20; i++) writeSync(devNull, 'x');
    // A wait that ends: a timer wakes the main thread.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const after = processIo(process.pid)!;
    expect(after.writes - before.writes).toBeGreaterThanOrEqual(20);
    expect(after.wakeups).toBeGreaterThan(before.wakeups);
    expect(processIo(undefined)).toBeUndefined();
  });

  it("pairs the federation section's saturation rounds in order for the spread of a ratio", () => {
    const at = (wholeUs: number, decisionsPerSec = 1_000) => ({ senderUs: wholeUs / 2, wholeUs, decisionsPerSec });
    const standalone = [at(100), at(80), at(120, 900)];
    const federated = [at(150), at(132), at(168, 630)];
    expect(roundSpread(standalone, federated, (r) => r.wholeUs)).toEqual([1.4, 1.65]);
    expect(roundSpread(standalone, federated, (r) => r.decisionsPerSec)).toEqual([0.7, 1]);
    // A round without a partner on the other side is left out; a single pair, or a zero base, gives no spread.
    expect(roundSpread(standalone, federated.slice(0, 2), (r) => r.senderUs)).toEqual([1.5, 1.65]);
    expect(roundSpread(standalone.slice(0, 1), federated, (r) => r.wholeUs)).toBeUndefined();
    expect(roundSpread([at(0), at(0)], federated, (r) => r.wholeUs)).toBeUndefined();
  });

  it("shows a hot-path target's spread over the rounds beside its ratio", () => {
    const figures: Record<string, number> = { 'http.check.rps': 13_689, 'http.rlf-check.rps': 20_013 };
    figures['http.checkOverRlf'] = 0.68;
    recordSpread(figures, 'http.checkOverRlf', [0.61, 0.8, 0.68]);
    recordSpread(figures, 'http.middlewareOverRlf', [0.9]);
    figures['http.middlewareOverRlf'] = 0.9;
    expect(figures['http.checkOverRlf.low']).toBe(0.61);
    expect(figures['http.checkOverRlf.high']).toBe(0.8);
    expect(spreadOf([Number.NaN, 1.2])).toBeUndefined();
    const rows = Object.fromEntries(targetsTable(figures).rows.map((row) => [row.target, row.measured]));
    expect(rows['1. /v1/check >= 1.0x Hono + rate-limiter-flexible, same route and body, fresh API key per request']).toMatch(
      /^0\.68x \(13689 vs 20013 req\/s; .*\); rounds 0\.61-0\.8x$/,
    );
    // One round: no spread to show.
    expect(rows["1. Hono middleware >= 1.0x rate-limiter-flexible's middleware app, same route"]).not.toContain('rounds');
  });

  it('sizes the federation section from flags, draws uniform and Zipf keys, and reads gossip figures from /metrics', () => {
    expect(
      federationSizes(
        false,
        [
          '--keys',
          '1000',
          '--zipf',
          '0',
          '--seconds',
          '3',
          '--rounds',
          '3',
          '--lease',
          '20',
          '--warm-up',
          '30',
          '--rates',
          '250,1_000',
          '--algorithm',
          'slidingWindow',
        ],
        {},
      ),
    ).toEqual({
      lease: 20,
      algorithm: 'slidingWindow',
      uniformKeys: [1_000],
      zipfKeys: 0,
      seconds: 3,
      rounds: 3,
      warmUpS: 30,
      rates: [250, 1_000],
    });
    expect(federationSizes(false, [], {})).toEqual({
      lease: 0,
      algorithm: 'tokenBucket',
      uniformKeys: [1_000, 100_000, 1_000_000],
      zipfKeys: 1_000_000,
      seconds: 10,
      rounds: 4,
      warmUpS: 2,
      rates: [],
    });
    expect(federationSizes(true, [], { QUOTAFED_BENCH_FEDERATION_KEYS: '500' }).uniformKeys).toEqual([500]);
    expect(() => federationSizes(false, ['--algorithm', 'slidingLog'], {})).toThrow(/--algorithm must be one of/);
    const draws = 20_000;
    const uniform = keyDraw({ distribution: 'uniform', keys: 1_000, seed: 3 });
    const zipf = keyDraw({ distribution: 'zipf', keys: 1_000, seed: 3 });
    const counts = (next: () => number) => {
      const seen = new Map<number, number>();
      for (let i = 0; i < draws; i++) {
        const key = next();
        expect(key).toBeGreaterThanOrEqual(0);
        expect(key).toBeLessThan(1_000);
        seen.set(key, (seen.get(key) ?? 0) + 1);
      }
      return seen;
    };
    // Zipf(1.0) over 1,000 keys: rank 1 takes 1/H(1000) ≈ 13% of the draws; uniform about 0.1%.
    expect((counts(zipf).get(0) ?? 0) / draws).toBeGreaterThan(0.11);
    expect((counts(uniform).get(0) ?? 0) / draws).toBeLessThan(0.005);
    const before = [
      'quotafed_federation_bytes_total{region="us-east",peer="eu-west",direction="sent"} 100',
      'quotafed_federation_bytes_total{region="us-east",peer="eu-west",direction="received"} 7',
      'quotafed_federation_sync_lag_seconds_bucket{region="eu-west",peer="us-east",le="0.1"} 5',
      'quotafed_federation_sync_lag_seconds_bucket{region="eu-west",peer="us-east",le="1"} 5',
      'quotafed_federation_sync_lag_seconds_bucket{region="eu-west",peer="us-east",le="+Inf"} 5',
    ].join('\n');
    const after = [
      'quotafed_federation_bytes_total{region="us-east",peer="eu-west",direction="sent"} 350',
      'quotafed_federation_bytes_total{region="us-east",peer="ap-south",direction="sent"} 50',
      'quotafed_federation_sync_lag_seconds_bucket{region="eu-west",peer="us-east",le="0.1"} 104',
      'quotafed_federation_sync_lag_seconds_bucket{region="eu-west",peer="us-east",le="1"} 105',
      'quotafed_federation_sync_lag_seconds_bucket{region="eu-west",peer="us-east",le="+Inf"} 105',
    ].join('\n');
    expect(
      sumOf(after, 'quotafed_federation_bytes_total', { direction: 'sent' }) -
        sumOf(before, 'quotafed_federation_bytes_total', { direction: 'sent' }),
    ).toBe(300);
    const lag = (text: string) => histogramBuckets(text, 'quotafed_federation_sync_lag_seconds', { peer: 'us-east' });
    // 100 observations since the first reading: 99 at most 0.1 s, one up to 1 s.
    expect(quantileBetween(lag(before), lag(after), 0.99)).toBe(0.1);
    expect(quantileBetween(lag(before), lag(after), 1)).toBe(1);
    expect(quantileBetween(lag(after), lag(after), 0.99)).toBeUndefined();
    // Interpolated as histogram_quantile does: rank 49.5 of the 99 in (0, 0.1] is at 0.05; rank 99.5 is halfway
    // into (0.1, 1]; a quantile in +Inf answers the highest finite bound.
    expect(quantileBetween(lag(before), lag(after), 0.495, true)).toBeCloseTo(0.05, 10);
    expect(quantileBetween(lag(before), lag(after), 0.995, true)).toBeCloseTo(0.55, 10);
    const open = new Map([
      [0.1, 1],
      [Number.POSITIVE_INFINITY, 4],
    ]);
    expect(quantileBetween(new Map(), open, 0.9, true)).toBe(0.1);
  });

  it('runs the service under node:cluster in a child process and load-tests it from another', async () => {
    const service = await startServer('service', {
      redisUrl: server.url,
      workers: 2,
      // A day-long window: the test never straddles a window boundary, so exactly 5 are admitted.
      config: { region: 'us-east', rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 5, period: '1d' }] },
    });
    try {
      const response = await fetch(`${service.url}/v1/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ apiKey: 'smoke', method: 'GET', path: '/' }),
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ allowed: true, remaining: 4 });
      // One key, limit 5 per day: whichever worker answers, Redis decides, so exactly 4 more are admitted.
      const figures = await runLoad({
        url: service.url,
        method: 'POST',
        path: '/v1/check',
        connections: 2,
        durationS: 1,
        warmupS: 0,
        apiKeys: 1,
        apiKey: 'smoke',
      });
      expect(figures.errors).toBe(0);
      expect(figures.statuses['200']).toBeGreaterThan(4);
      const after = await fetch(`${service.url}/v1/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ apiKey: 'smoke', method: 'GET', path: '/' }),
      });
      expect((await after.json()) as { allowed: boolean }).toMatchObject({ allowed: false, status: 429 });
      const [stateKey] = await admin.keys('qf:*:per-key:*');
      const state = await admin.hgetall(stateKey!);
      const admitted = Object.entries(state)
        .filter(([field]) => field.startsWith('c'))
        .reduce((sum, [, value]) => sum + Number(value), 0);
      expect(admitted).toBe(5);
    } finally {
      await service.stop();
    }
  }, 60_000);
});

// Mismatched weights between regions: both regions must say so at start-up — /readyz not ready with
// the reason — and log it once per peer, not once per rejected gossip job.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { captureLog, eventually, metricValue, type CapturedLog } from '../service/fixtures.ts';

const SECRET = 'fingerprint-federation-secret';

describe('regions configured with different weights', () => {
  let redisA: RedisProcess;
  let redisB: RedisProcess;
  let a: RegionService;
  let b: RegionService;
  let logA: CapturedLog;
  let logB: CapturedLog;

  const start = (name: string, own: RedisProcess, peerName: string, peer: RedisProcess, peerWeight: number, log: CapturedLog) =>
    startRegionService(
      parseConfig({
        region: name,
        port: 0,
        redis: { url: own.url, commandTimeoutMs: 1_000 },
        federation: { syncIntervalMs: 50, secret: SECRET, peers: [{ name: peerName, redisUrl: peer.url, weight: peerWeight }] },
        rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1m' }],
      }),
      { logger: log.logger, newFederation: true },
    );

  beforeAll(async () => {
    [redisA, redisB] = await Promise.all([startRedis(), startRedis()]);
    logA = captureLog();
    logB = captureLog();
    a = await start('a', redisA, 'b', redisB, 1, logA); // a thinks b weighs 1
    b = await start('b', redisB, 'a', redisA, 2, logB); // b thinks a weighs 2
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await redisA?.stop();
    await redisB?.stop();
  });

  it('reports the mismatch on /readyz and logs it once per peer while every job is rejected', async () => {
    for (const [service, peer] of [
      [a, 'b'],
      [b, 'a'],
    ] as const) {
      let reasons: string[] = [];
      await eventually(
        async () => {
          const res = await fetch(`${service.url}/readyz`);
          if (res.status !== 503) return false;
          reasons = ((await res.json()) as { reasons: string[] }).reasons;
          return reasons.some((reason) => reason.includes('fingerprint'));
        },
        15_000,
        `${service.config.region} to report the mismatch`,
      );
      expect(reasons.join(' ')).toMatch(new RegExp(`${peer} has topology fingerprint`));
    }
    // Many gossip jobs: traffic on both sides for a while, each admission of a crossing the watermark of its share
    // (52 of 100 + 5), so the keys turn loud (a small admission far below the share is silent:
    // src/protocol/admission-gossip.ts).
    for (let i = 0; i < 40; i++) {
      await a.engine.decide({ apiKey: `k${i}`, ip: '10.0.0.1', method: 'GET', path: '/', cost: 50 });
      await b.engine.decide({ apiKey: `k${i}`, ip: '10.0.0.1', method: 'GET', path: '/' });
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await a.federation!.flush();
    await b.federation!.flush();
    await new Promise((resolve) => setTimeout(resolve, 500));
    // b started after a under another topology, so it fenced its current windows and admits nothing to gossip
    // about: the jobs come from a, and b rejects them.
    expect(b.federation!.recovery).toMatchObject({ fenced: true });
    const page = await (await fetch(`${b.url}/metrics`)).text();
    expect(await metricValue(page, 'quotafed_federation_rejected_jobs_total', { region: 'b', reason: 'fingerprint' })).toBeGreaterThan(3);
    for (const [log, peer] of [
      [logA, 'b'],
      [logB, 'a'],
    ] as const) {
      const mismatch = log.lines().filter((line) => line.event === 'federation.fingerprint_mismatch');
      expect(mismatch).toHaveLength(1);
      expect(mismatch[0]).toMatchObject({ peer });
      const warnedPerJob = log
        .lines()
        .filter((line) => line.event === 'federation.gossip_rejected' && line.reason === 'fingerprint' && (line.level as number) >= 40);
      expect(warnedPerJob).toEqual([]);
    }
  });
});

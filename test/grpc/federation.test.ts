// Envoy RLS decisions federate like HTTP ones: two regions (two redis-servers, real gossip), an Envoy rule of
// 20 per hour with no leakage budget, ShouldRateLimit calls spread over both regions: together they never
// admit more than 20, and a region sees what the other admitted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRlsClient, type RlsClient } from '../../src/grpc/client.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, eventually, metricValue } from '../service/fixtures.ts';

const SECRET = 'grpc-federation-secret-0123';

describe('Envoy RLS across a federation', async () => {
  const redisA = await useRedis();
  const redisB = await useRedis();
  const services: RegionService[] = [];
  const clients: RlsClient[] = [];

  const region = (name: string, own: string, peer: string, peerUrl: string) =>
    parseConfig({
      region: name,
      port: 0,
      logLevel: 'silent',
      grpc: { port: 0 },
      redis: { url: own, commandTimeoutMs: 2_000 },
      federation: { syncIntervalMs: 50, leakageBudget: 0, secret: SECRET, peers: [{ name: peer, redisUrl: peerUrl }] },
      rules: [
        {
          name: 'rls-tenant',
          match: { envoy: { domain: 'edge', descriptor: [{ key: 'tenant' }] } },
          algorithm: 'fixedWindow',
          limit: 20,
          period: '1h',
        },
      ],
    });

  beforeAll(async () => {
    await awayFromWindowEdge(3_600_000, 20_000);
    services.push(
      ...(await Promise.all([
        startRegionService(region('a', redisA.url, 'b', redisB.url), { dashboard: false, newFederation: true }),
        startRegionService(region('b', redisB.url, 'a', redisA.url), { dashboard: false, newFederation: true }),
      ])),
    );
    clients.push(...services.map((s) => createRlsClient(s.grpcAddress!)));
  });
  afterAll(async () => {
    for (const client of clients) client.close();
    await Promise.all(services.map((s) => s.close()));
  });

  const call = (index: number) =>
    clients[index]!.shouldRateLimit({ domain: 'edge', descriptors: [{ entries: [{ key: 'tenant', value: 'shared-tenant' }] }] });

  it('admits at most the limit over both regions, and each region sees the other', async () => {
    let admitted = 0;
    for (let i = 0; i < 8; i++) if ((await call(0)).overall_code === 'OK') admitted++;
    expect(admitted).toBe(8);
    // Region b hears of a's 8 admissions through gossip: its answer counts them.
    await eventually(
      async () => {
        const status = (await call(1)).statuses[0]!;
        if (status.code === 'OK') admitted++;
        return status.limit_remaining <= 20 - 8 - 1;
      },
      10_000,
      "region b's view of a's admissions",
    );
    for (let i = 0; i < 60; i++) {
      if ((await call(i % 2)).overall_code === 'OK') admitted++;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(admitted).toBeLessThanOrEqual(20);
    expect(admitted).toBeGreaterThanOrEqual(15);
  });

  it("an overridden limit holds over both regions: peers skip its key instead of merging it under the rule's limit", async () => {
    const overridden = (index: number) =>
      clients[index]!.shouldRateLimit({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'tenant', value: 'override-tenant' }], limit: { requests_per_unit: 6, unit: 'HOUR' } }],
      });
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      const answer = await overridden(i % 2);
      expect(answer.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 6, unit: 'HOUR' });
      if (answer.overall_code === 'OK') admitted++;
      await new Promise((r) => setTimeout(r, 20));
    }
    // Each region within its own share of 6 (3 + 3 with equal weights, no leakage budget): never more than 6.
    expect(admitted).toBeLessThanOrEqual(6);
    expect(admitted).toBeGreaterThanOrEqual(4);
    await eventually(
      async () => {
        const texts = await Promise.all(services.map(async (s) => (await fetch(`${s.url}/metrics`)).text()));
        const skipped = await Promise.all(
          texts.map((t) => metricValue(t, 'quotafed_federation_skipped_entries_total', { reason: 'unknown_rule' })),
        );
        return skipped.every((n) => n > 0);
      },
      10_000,
      'both regions skip the overridden key',
    );
    // No gossip job was rejected for carrying it: the other keys keep federating.
    for (const s of services) {
      const text = await (await fetch(`${s.url}/metrics`)).text();
      expect(await metricValue(text, 'quotafed_federation_rejected_jobs_total')).toBe(0);
    }
  });
});

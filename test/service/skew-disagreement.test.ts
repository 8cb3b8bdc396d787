// Regions that disagree on `federation.maxClockSkewMs` (a restart one region at a time with a new skew; issue 21,
// item 2): every rule's fingerprint carries the skew, so each region skips the other's gossip and decides within its
// own allowance, says so on /readyz, and the region with the smaller skew decides with the larger one (the tighter
// assumption: a share returns and a fence ends later). Two real region services on their own redis-servers.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { checksAt, readyWarnings, startPairFromFiles, writePairConfig, type PairRegion } from '../support/region-pair-files.ts';
import { eventually } from '../support/wait.ts';

const east = await useRedis();
const west = await useRedis();
const dir = mkdtempSync(join(tmpdir(), 'quotafed-skew-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rule = { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1h' };
const write = (region: PairRegion, maxClockSkewMs: number) =>
  writePairConfig(dir, region, { 'us-east': east.url, 'eu-west': west.url }, [rule], { leakageBudget: 0, maxClockSkewMs });

const admitted = async (service: RegionService, apiKey: string, requests: number) =>
  (await checksAt(service, apiKey, requests)).filter((verdict) => verdict.allowed).length;

describe('regions that disagree on maxClockSkewMs', () => {
  it('decide with the larger skew, each within its own allowance, and say so', async () => {
    const services: RegionService[] = [];
    try {
      const [usEast, euWest] = await startPairFromFiles({ east: write('us-east', 1_000), west: write('eu-west', 3_000) }, services);
      // us-east reads eu-west's published terms: its engine decides with eu-west's larger skew.
      await eventually(async () => usEast.engine.config.federation.maxClockSkewMs === 3_000, 10_000, 'us-east deciding with skew 3000');
      await eventually(async () => (await readyWarnings(usEast)).some((line) => line.includes('eu-west runs rule "per-key"')), 10_000);
      // eu-west's own skew is the larger one: nothing to tighten there.
      expect(euWest.engine.config.federation.maxClockSkewMs).toBe(3_000);
      // What the service was configured with stays as it was.
      expect(usEast.policy.config.federation.maxClockSkewMs).toBe(1_000);

      // The rule's gossip is skipped both ways (the fingerprints differ): each region spends its own half only.
      const fromEast = await admitted(usEast, 'skew-key', 80);
      const fromWest = await admitted(euWest, 'skew-key', 80);
      expect(fromEast).toBe(50);
      expect(fromWest).toBe(50);
    } finally {
      await Promise.all(services.map((service) => service.close()));
    }
  }, 60_000);
});

// A limit reloaded one region at a time (issue 21, item 2): two real region services on their own redis-servers,
// fixedWindow L = 100, B = 0, equal weights. us-east reloads the rule at L = 200 while eu-west still runs 100. The
// regions skip each other's gossip of that rule (their counts were made under other parameters), so each decides
// within its own allowance; us-east reads eu-west's published terms and decides at the tighter limit, so the
// window admits at most the tighter config's L + B = 100 (each its half), not 50 + 100 = 150. Once eu-west runs
// 200 too, both decide at 200 again.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { checkAt, checksAt, readyWarnings, startPairFromFiles, writePairConfig, type PairRegion } from '../support/region-pair-files.ts';
import { eventually } from '../support/wait.ts';

const east = await useRedis();
const west = await useRedis();
const dir = mkdtempSync(join(tmpdir(), 'quotafed-rolling-limit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rule = (limit: number) => ({ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit, period: '1h' });
const write = (region: PairRegion, limit: number) =>
  writePairConfig(dir, region, { 'us-east': east.url, 'eu-west': west.url }, [rule(limit)], { leakageBudget: 0 });

const admitted = async (service: RegionService, apiKey: string, requests: number) =>
  (await checksAt(service, apiKey, requests)).filter((verdict) => verdict.allowed).length;

describe('a limit reloaded one region at a time', () => {
  it('keeps the window within the tighter config, says so, and lifts the hold once the regions agree', async () => {
    const paths = { east: write('us-east', 100), west: write('eu-west', 100) };
    const services: RegionService[] = [];
    try {
      const [usEast, euWest] = await startPairFromFiles(paths, services);

      write('us-east', 200);
      expect((await usEast.reloadPolicy()).ok).toBe(true);
      // us-east reads eu-west's terms at its next round: the disagreement is on /readyz, and the limit it decides
      // with (and reports) is the tighter one.
      await eventually(async () => (await readyWarnings(usEast)).some((line) => line.includes('eu-west runs rule "per-key"')), 10_000);
      await eventually(async () => (await checkAt(usEast, 'probe')).limit === 100, 10_000, 'us-east deciding at the tighter limit');

      const key = 'rolling-key';
      const fromEast = await admitted(usEast, key, 150);
      const fromWest = await admitted(euWest, key, 150);
      // Each region spends its own half of the tighter limit (their gossip of the rule is skipped both ways).
      expect(fromEast).toBe(50);
      expect(fromWest).toBe(50);
      expect(fromEast + fromWest).toBeLessThanOrEqual(100);

      // eu-west catches up: both run 200, the hold is lifted and the warning clears.
      write('eu-west', 200);
      expect((await euWest.reloadPolicy()).ok).toBe(true);
      await eventually(async () => (await checkAt(usEast, 'probe')).limit === 200, 15_000, 'us-east back at its own limit');
      await eventually(async () => (await readyWarnings(usEast)).length === 0, 15_000, "us-east's warning cleared");
    } finally {
      await Promise.all(services.map((service) => service.close()));
    }
  }, 60_000);
});

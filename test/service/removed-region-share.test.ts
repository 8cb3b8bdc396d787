// A region removed from a running federation (issue 21, "the bound through what operators do"), by the procedure
// of docs/operations.md §6a, on three real region services with their own redis-servers: ap-south's service is
// stopped for good, then us-east and eu-west are restarted one after the other on the two-region peer list. Equal
// weights, fixedWindow L = 30, B = 0, a period of 12 s so the next window comes within the test.
//
// The arithmetic (src/protocol/params.ts, docs/federation.md §2). Three regions: share units 333333 each,
// floor(30·333333/10^6) = 9 each, remainder R = 3 = 1 each: a third is 10. Two regions: 500000 each, floor(30/2) = 15,
// R = 0: a half is 15. Cells are addressed by region index (name order), so after the change eu-west (index 1 of
// three, 0 of two) and us-east (2 of three, 1 of two) would read the window's old cells under the new layout: a
// restart that sees its recorded topology fingerprint changed fences the current window ("regions or weights
// changed"; a fixedWindow's fence ends with its window, no maxClockSkewMs is added: that is for token buckets). So
//   (a) the window of the change admits nothing more after the restarts: its total stays ≤ L + B;
//   (b) from the next window each of the two admits from its new half (15, more than its old third of 10), and the
//       two together reach L (ap-south's share returned: two thirds would be 20) and stay ≤ L + B.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ruleFederationParams, topologyOf, windowBase } from '../../src/protocol/index.ts';
import type { RegionService } from '../../src/service.ts';
import {
  admittedByWindow,
  checksAt,
  startFromFiles,
  writeRegionConfig,
  THREE_REGIONS,
  type RegionName,
  useRegionRedis,
} from '../support/region-pair-files.ts';
import { eventually, sleep } from '../support/wait.ts';

const LIMIT = 30;
const BUDGET = 0;
const PERIOD = 12_000;
/** Time the admissions before the change and the three service stops and restarts need, within one window. */
const CHANGE_MS = 9_000;

const redis = await useRegionRedis();
const dir = mkdtempSync(join(tmpdir(), 'quotafed-removed-share-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rule = { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: LIMIT, period: PERIOD };
/** `region`'s config in a federation of `members`. */
const write = (region: RegionName, members: readonly RegionName[]) =>
  writeRegionConfig(dir, region, Object.fromEntries(members.map((name) => [name, redis[name]])), [rule], { leakageBudget: BUDGET });

/** `service`'s own base share of window `id` (the protocol's windowBase, from the config it runs). */
function shareOf(service: RegionService, id: number): number {
  return windowBase(ruleFederationParams(service.config, service.config.rules[0]!), topologyOf(service.config).selfIndex, id);
}

const sum = (counts: number[]) => counts.reduce((total, count) => total + count, 0);
const windowOf = (ms: number) => Math.floor(ms / PERIOD);

describe("a region removed: the window of the change stays within L + B, and the removed region's share returns", () => {
  it('fences the window of the change, then gives the two remaining regions their halves from the next window', async () => {
    const services: RegionService[] = [];
    try {
      const thirds = await startFromFiles(
        THREE_REGIONS.map((name) => write(name, THREE_REGIONS)),
        services,
      );
      const [apSouth, euWest, usEast] = thirds;
      const key = 'removed-share';

      // A window with room for the whole change: the rest of this one, or the next.
      if ((windowOf(Date.now()) + 1) * PERIOD - Date.now() < CHANGE_MS) await sleep((windowOf(Date.now()) + 1) * PERIOD - Date.now() + 20);
      const changed = windowOf(Date.now());

      // Some admitted in each region (8 requests each, a third is 10), in the window of the change.
      const before = await Promise.all(thirds.map(async (service) => admittedByWindow(await checksAt(service, key, 8))));
      for (const admissions of before) expect([...admissions.keys()]).toEqual([changed]);
      const admittedBefore = before.map((admissions) => admissions.get(changed) ?? 0);
      expect(admittedBefore.every((count) => count > 0)).toBe(true);
      expect(shareOf(usEast!, changed)).toBe(LIMIT / 3);

      // docs/operations.md §6a: stop the removed region for good, then restart the others on the new peer list.
      await apSouth!.close();
      const remaining = ['eu-west', 'us-east'] as const;
      const restarted: RegionService[] = [];
      for (const [name, old] of [
        ['us-east', usEast!],
        ['eu-west', euWest!],
      ] as const) {
        await old.close();
        restarted.push(...(await startFromFiles([write(name, remaining)], services, { newFederation: false })));
      }
      for (const service of restarted) {
        const recovery = service.federation!.recovery!;
        expect(recovery.fenced).toBe(true);
        expect(recovery.reason).toMatch(/regions or weights changed/);
        // The change happened in the window of the admissions above.
        expect(windowOf(recovery.fence)).toBe(changed);
      }

      // (a) After the restarts, nothing more in the window of the change.
      const after = await Promise.all(restarted.map(async (service) => admittedByWindow(await checksAt(service, key, 20))));
      const admittedAfter = after.map((admissions) => admissions.get(changed) ?? 0);
      // These attempts fell in the window of the change too (the next window is still untouched).
      expect(windowOf(Date.now()), 'the change and its check took longer than CHANGE_MS').toBe(changed);
      expect(admittedAfter).toEqual([0, 0]);
      expect(sum(admittedBefore) + sum(admittedAfter)).toBeLessThanOrEqual(LIMIT + BUDGET);

      // Both on the two-region topology: each is ready (no fingerprint mismatch) once it reads the other's.
      for (const service of restarted) {
        await eventually(async () => (await fetch(`${service.url}/readyz`)).ok, 15_000, `${service.config.region} ready`);
      }

      // (b) The next window after both fences (or the one after it, if less than 3 s of it is left by now): the
      // window's traffic all comes after the change.
      const fenced = Math.max(...restarted.map((service) => windowOf(service.federation!.recovery!.fence)));
      const next = Math.max(fenced + 1, windowOf(Date.now() + 3_000));
      await sleep(Math.max(0, next * PERIOD - Date.now() + 20));
      const verdicts = await Promise.all(restarted.map((service) => checksAt(service, key, 20)));
      const admittedNext = verdicts.map((answers) => admittedByWindow(answers).get(next) ?? 0);
      const byRegion = (list: RegionService[], counts: number[]) => Object.fromEntries(list.map((s, i) => [s.config.region, counts[i]]));
      const detail = JSON.stringify({
        before: byRegion(thirds, admittedBefore),
        after: byRegion(restarted, admittedAfter),
        next: byRegion(restarted, admittedNext),
      });
      for (const [i, service] of restarted.entries()) {
        const half = shareOf(service, next);
        expect(half).toBe(LIMIT / 2);
        // Its first answer in the window shows its allowance: its new half (it admitted one of it).
        const first = verdicts[i]![0]!;
        expect(first.allowed, detail).toBe(true);
        expect(first.outcomes[0]!.resetAtMs).toBe((next + 1) * PERIOD);
        expect(first.regionRemaining! + 1, detail).toBe(half);
        // It admits more than its old third.
        expect(admittedNext[i]!, detail).toBeGreaterThan(LIMIT / 3);
      }
      expect(sum(admittedNext), detail).toBeLessThanOrEqual(LIMIT + BUDGET);
      // Not vacuous: the two spent the whole window, a third more than their two old thirds.
      expect(sum(admittedNext), detail).toBe(LIMIT);
    } finally {
      await Promise.all(services.map((service) => service.close()));
    }
  }, 60_000);
});

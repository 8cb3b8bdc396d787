// Issue 21's own rolling example (item 2): three real region services on their own redis-servers, weights
// ap-south 1, eu-west 2, us-east 3, fixedWindow L = 3, B = 0, reloaded to L = 4 one region at a time (us-east, then
// eu-west, then ap-south). Before the tighter-terms hold, the regions that disagreed each decided at their own
// terms and the window could admit more than either config: 5 > 4.
//
// The arithmetic (src/protocol/window-decide.ts windowBase, docs/federation.md §2). Region indexes are in name
// order: ap-south 0, eu-west 1, us-east 2. Share units u = 166666, 333333, 500000. The split used to be the
// largest-remainder one, floor(T·u_d/10^6) plus a remainder unit rotating with the window id w:
//   T = 3: w ≡ 0 (mod 3): 1, 1, 1    w ≡ 1: 0, 1, 2    w ≡ 2: 1, 0, 2
//   T = 4: w ≡ 0: 1, 1, 2            w ≡ 1: 0, 2, 2    w ≡ 2: 0, 1, 3
// In a window w ≡ 2 the two configs' shares crossed: ap-south held 1 at L = 3 but 0 at L = 4, so once all ran 4
// the 1 it had admitted stayed counted beside eu-west's 1 and us-east's 3: 5 > 4, even with the tighter terms
// held while the regions disagreed (and with no rolling at all: any raise mid-window). This test found it. The
// split is now house-monotone (D'Hondt's priority for the remainder, ties rotating with w): 3 → 4 never lowers a
// base. The test runs in a window w ≡ 2 (mod 3), where the old split failed.
//
// At each step every region gets traffic on one key (three concurrent streams, as regions see it), after the
// region that reloaded and its peers decide at the terms they should (the /v1/check answer's `limit`) and the
// disagreement shows on /readyz. The window's total, summed over regions, must never exceed
// max(L_min + B, what was admitted before the step): 3 while any region runs 3, and 4 once all run 4. The last step
// is the delicate one: ap-south admitted its share at 3 (1) before, more than its share at 4 (0), while us-east's
// share grows from 2 to 3; so once all run 4 the window stays within 4 only if what ap-south admitted at 3 still
// counts against the others' admissions at 4.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { federationParams, windowBase } from '../../src/protocol/index.ts';
import type { RegionService } from '../../src/service.ts';
import {
  admittedByWindow,
  checkAt,
  checksAt,
  readyWarnings,
  startFromFiles,
  writeRegionConfig,
  THREE_REGIONS,
  type RegionName,
  useRegionRedis,
} from '../support/region-pair-files.ts';
import { eventually } from '../support/wait.ts';

const WEIGHTS: Record<RegionName, number> = { 'ap-south': 1, 'eu-west': 2, 'us-east': 3 };
const ROLLOUT: RegionName[] = ['us-east', 'eu-west', 'ap-south'];
const [FROM, TO] = [3, 4];
const BUDGET = 0;
/** Requests per region and step: more than any region's share at either limit. */
const REQUESTS = 6;

const urls = await useRegionRedis();
const dir = mkdtempSync(join(tmpdir(), 'quotafed-rolling-three-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Every region's base share of window `id` at limit `limit` (B = 0), by index. */
function baseShares(limit: number, periodMs: number, id: number): number[] {
  return THREE_REGIONS.map((_, d) =>
    windowBase(
      federationParams({
        regions: THREE_REGIONS.length,
        self: d,
        weights: THREE_REGIONS.map((name) => WEIGHTS[name]),
        limit,
        periodMs,
        leakageBudget: BUDGET,
        maxClockSkewMs: 1_000,
      }),
      d,
      id,
    ),
  );
}

/**
 * A period of 60 to 120 whole minutes whose current window id is ≡ 2 (mod 3) (where the old split's shares crossed)
 * with at least 5 minutes of it left; and that window's id.
 */
function crossingWindow(): { periodMs: number; id: number } {
  const now = Date.now();
  for (let minutes = 60; minutes <= 120; minutes++) {
    const periodMs = minutes * 60_000;
    const id = Math.floor(now / periodMs);
    if (id % 3 === 2 && (id + 1) * periodMs - now >= 5 * 60_000) return { periodMs, id };
  }
  throw new Error('no period of 60 to 120 minutes puts now in a window w ≡ 2 (mod 3)');
}

describe('a limit reloaded one region at a time in three weighted regions (issue 21)', () => {
  it('never admits more than max(L_min + B, what was admitted before) at any step of the rollout', async () => {
    const { periodMs, id } = crossingWindow();
    const rule = (limit: number) => ({ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit, period: periodMs });
    const write = (region: RegionName, limit: number) =>
      writeRegionConfig(dir, region, urls, [rule(limit)], { leakageBudget: BUDGET }, WEIGHTS);
    const services: RegionService[] = [];
    try {
      const started = await startFromFiles(
        THREE_REGIONS.map((name) => write(name, FROM)),
        services,
      );
      const service = Object.fromEntries(THREE_REGIONS.map((name, i) => [name, started[i]!])) as Record<RegionName, RegionService>;

      const key = 'rolling-three';
      const admitted: Record<RegionName, number[]> = { 'ap-south': [], 'eu-west': [], 'us-east': [] };
      let total = 0;
      const reloaded: RegionName[] = [];
      for (const region of ROLLOUT) {
        write(region, TO);
        expect((await service[region].reloadPolicy()).ok).toBe(true);
        reloaded.push(region);
        const pending = THREE_REGIONS.filter((name) => !reloaded.includes(name));
        // While one region still runs L = 3, every region decides at 3 (the tighter terms); then all at 4.
        const deciding = pending.length > 0 ? FROM : TO;
        for (const name of THREE_REGIONS) {
          await eventually(
            async () => (await checkAt(service[name], 'probe')).limit === deciding,
            15_000,
            `${name} deciding at ${deciding} after ${region} reloaded`,
          );
        }
        // Each region lists on /readyz exactly the peers that run the rule otherwise (none once all agree).
        for (const name of THREE_REGIONS) {
          const otherwise = THREE_REGIONS.filter((peer) => peer !== name && reloaded.includes(peer) !== reloaded.includes(name));
          await eventually(
            async () => {
              const lines = await readyWarnings(service[name]);
              return (
                lines.length === otherwise.length &&
                otherwise.every((peer) => lines.some((line) => line.includes(`${peer} runs rule "per-key"`)))
              );
            },
            15_000,
            `${name}'s /readyz warnings naming [${otherwise.join(', ')}] after ${region} reloaded`,
          );
        }

        const before = total;
        const windows = await Promise.all(
          THREE_REGIONS.map(async (name) => admittedByWindow(await checksAt(service[name], key, REQUESTS))),
        );
        // Every admission falls in the one window of the test (the period is long).
        for (const admissions of windows) expect([...admissions.keys()].every((window) => window === id)).toBe(true);
        const counts = windows.map((admissions) => admissions.get(id) ?? 0);
        THREE_REGIONS.forEach((name, i) => admitted[name].push(counts[i]!));
        total += counts.reduce((sum, count) => sum + count, 0);
        const step = `after ${region} reloaded: ${JSON.stringify(admitted)}`;
        expect(total, step).toBeLessThanOrEqual(Math.max(deciding + BUDGET, before));
        expect(total, step).toBeLessThanOrEqual(TO + BUDGET);
        // Not vacuous: at the first step each region spent its own share of the tighter config's window (their gossip
        // of the rule skipped, or agreeing with nothing to move).
        if (reloaded.length === 1) expect(counts, step).toEqual(baseShares(FROM, periodMs, id));
      }

      // Not vacuous: once every region runs 4 the window reaches 4.
      expect(total, JSON.stringify(admitted)).toBe(TO);
    } finally {
      await Promise.all(services.map((s) => s.close()));
    }
  }, 60_000);
});

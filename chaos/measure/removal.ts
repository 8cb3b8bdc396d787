// What a region's removal did to the window rule's admissions: per window and region around the change, and
// whether the removed region's share went to the others in the first window wholly after it (docs/operations.md
// §6a: "the removed region's share goes to the others from the next window on").
import { REGIONS, type Decision, type RegionName } from '../types.ts';

export interface RemovalWindows {
  /** The removed region. */
  region: RegionName;
  /** Run start on the wall clock (ms since the epoch). */
  startEpochMs: number;
  /** When the last remaining region was back on the new peer list (ms after the run start). */
  changedAtMs: number;
  durationMs: number;
  windowLimit: number;
  windowPeriodMs: number;
  /** B of the window rule (null: unbounded). */
  budget: number | null;
}

/** Admitted requests per window id and region of one rule's decisions. */
export function admissionsPerWindow(decisions: readonly Decision[]): Map<number, Record<RegionName, number>> {
  const windows = new Map<number, Record<RegionName, number>>();
  for (const decision of decisions) {
    if (decision.outcome !== 'admitted') continue;
    const row = windows.get(decision.window) ?? (Object.fromEntries(REGIONS.map((r) => [r, 0])) as Record<RegionName, number>);
    row[decision.region] += 1;
    windows.set(decision.window, row);
  }
  return windows;
}

/**
 * The run's notes on a removal: the window rule's admissions per window (each region, the total), and whether a
 * region left admitted more than its old one-third share, (L + B)/3, in the first window that began after the
 * change (null there when the run ended before that window did).
 *
 * @example
 * removalNotes(load.quotafed, { region: 'ap-south', startEpochMs, changedAtMs: 9_100, durationMs: 20_000,
 *   windowLimit: 300, windowPeriodMs: 5_000, budget: 15 });
 */
export function removalNotes(decisions: readonly Decision[], removal: RemovalWindows): string[] {
  const period = removal.windowPeriodMs;
  const windowRule = decisions.filter((d) => d.rule === 'window');
  const perWindow = admissionsPerWindow(windowRule);
  const at = (id: number) => (id * period - removal.startEpochMs) / 1000;
  const span = (id: number) => `${Math.max(0, at(id)).toFixed(1)}–${Math.min(removal.durationMs / 1000, at(id + 1)).toFixed(1)} s`;
  const partial = (id: number) => at(id) < 0 || at(id + 1) > removal.durationMs / 1000;
  const ids = [...perWindow.keys()].sort((a, b) => a - b);
  const rows = ids.map((id) => {
    const row = perWindow.get(id)!;
    const total = REGIONS.reduce((sum, region) => sum + row[region], 0);
    return `${span(id)}${partial(id) ? ' (partial)' : ''}: ${REGIONS.map((r) => row[r]).join(' / ')} = ${total}`;
  });
  const notes = [`window rule admitted per window (${REGIONS.join(' / ')}): ${rows.join('; ')}`];
  const errors = REGIONS.map((region) => `${region} ${decisions.filter((d) => d.region === region && d.outcome === 'error').length}`);
  notes.push(`requests without a decision (a region stopping or restarting), both rules: ${errors.join(', ')}`);

  const next = Math.floor((removal.startEpochMs + removal.changedAtMs) / period) + 1;
  const left = REGIONS.filter((region) => region !== removal.region);
  const oldShare = (removal.windowLimit + (removal.budget ?? 0)) / REGIONS.length;
  if (partial(next)) {
    notes.push(
      `no full window after the change was observed (the change was over at ${(removal.changedAtMs / 1000).toFixed(2)} s; ` +
        `the next window ends at ${at(next + 1).toFixed(1)} s, the run at ${removal.durationMs / 1000} s)`,
    );
    return notes;
  }
  const row = perWindow.get(next) ?? (Object.fromEntries(REGIONS.map((r) => [r, 0])) as Record<RegionName, number>);
  const most = Math.max(...left.map((region) => row[region]));
  const admitted = left.map((region) => `${region} ${row[region]}`).join(', ');
  const total = REGIONS.reduce((sum, region) => sum + row[region], 0);
  const bucket = decisions.filter(
    (d) => d.rule === 'bucket' && d.outcome === 'admitted' && d.t >= at(next) * 1000 && d.t < at(next + 1) * 1000,
  );
  const bucketAdmitted = left.map((region) => `${region} ${bucket.filter((d) => d.region === region).length}`).join(', ');
  notes.push(
    `${most > oldShare ? `${removal.region}'s share returned` : `${removal.region}'s share did NOT return`}: in ${span(next)}, the ` +
      `first window after the change, the window rule admitted ${admitted} (${removal.region} ${row[removal.region]}; total ` +
      `${total} of ${removal.windowLimit}); a region's old one-third share is (L + B)/3 = ${oldShare.toFixed(1)}. Bucket rule ` +
      `in the same ${period / 1000} s: ${bucketAdmitted}`,
  );
  return notes;
}

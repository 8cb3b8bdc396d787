// Convergence after a heal, read straight from each region's Redis: at the heal, every region's own row
// (c<slot>.<self>) of the watched keys is snapshotted; the federation has converged once every other region's
// Redis holds a view of that row at least as high, for the same window. Traffic keeps flowing meanwhile, so
// "views equal" would never hold; "everything admitted before the heal is known everywhere" does.
import type { Redis } from 'ioredis';
import { ruleKey } from '../../src/keys.ts';
import { REGIONS, RULE_NAMES, type RegionName } from '../types.ts';

/** Index of a region in the federation: position among the sorted names (docs/architecture.md). */
export function regionIndex(region: RegionName): number {
  return [...REGIONS].sort().indexOf(region);
}

export function windowStateKey(apiKey: string): string {
  return ruleKey(RULE_NAMES.window, { principal: apiKey, dimensions: [apiKey] });
}

/** window id → admitted count in that window, for one region's row in one hash. */
export function rowOf(hash: Record<string, string>, origin: number): Map<number, number> {
  const row = new Map<number, number>();
  for (let slot = 0; slot < 3; slot++) {
    const id = hash[`w${slot}`];
    if (id === undefined) continue;
    row.set(Number(id), Number(hash[`c${slot}.${origin}`] ?? 0));
  }
  return row;
}

interface Target {
  key: string;
  origin: number;
  holder: RegionName;
  window: number;
  atLeast: number;
}

async function readAll(
  direct: Record<RegionName, Redis>,
  region: RegionName,
  keys: readonly string[],
): Promise<Array<Record<string, string>> | null> {
  try {
    return await Promise.all(keys.map((key) => direct[region].hgetall(key)));
  } catch {
    return null;
  }
}

export interface Convergence {
  /** Milliseconds from the call until every view held the snapshot; null when the deadline came first. */
  ms: number | null;
  /** At the deadline: the views still behind ("eu-west sees us-east's 120 of 135 in window …"). */
  behind: string[];
}

const NAME_BY_INDEX = [...REGIONS].sort();

export async function measureConvergence(
  direct: Record<RegionName, Redis>,
  apiKeys: readonly string[],
  timeoutMs: number,
  pollMs = 20,
): Promise<Convergence> {
  const started = Date.now();
  const keys = apiKeys.map(windowStateKey);
  const targets: Target[] = [];
  for (const region of REGIONS) {
    const hashes = await readAll(direct, region, keys);
    if (!hashes) continue; // a Redis that is down has nothing to spread
    hashes.forEach((hash, i) => {
      for (const [window, count] of rowOf(hash, regionIndex(region))) {
        if (count === 0) continue;
        for (const holder of REGIONS) {
          if (holder !== region) targets.push({ key: keys[i]!, origin: regionIndex(region), holder, window, atLeast: count });
        }
      }
    });
  }
  let pending: Target[] = targets;
  let views = new Map<RegionName, Map<string, Record<string, string>>>();
  while (Date.now() - started < timeoutMs) {
    views = new Map<RegionName, Map<string, Record<string, string>>>();
    for (const region of REGIONS) {
      const hashes = await readAll(direct, region, keys);
      if (hashes) views.set(region, new Map(hashes.map((hash, i) => [keys[i]!, hash])));
    }
    pending = targets.filter((target) => {
      const hash = views.get(target.holder)?.get(target.key);
      return !hash || (rowOf(hash, target.origin).get(target.window) ?? 0) < target.atLeast;
    });
    if (pending.length === 0) return { ms: Date.now() - started, behind: [] };
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  const behind = pending.slice(0, 3).map((target) => {
    const hash = views.get(target.holder)?.get(target.key);
    const seen = hash ? (rowOf(hash, target.origin).get(target.window) ?? 0) : 'nothing (unreachable)';
    return `${target.holder} sees ${seen} of ${NAME_BY_INDEX[target.origin]}'s ${target.atLeast} in window ${target.window}`;
  });
  return { ms: null, behind };
}

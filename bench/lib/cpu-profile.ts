// Reading a V8 CPU profile (node --cpu-prof): self time per frame and inclusive time under named frames.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url
    .replace(/^.*\/node_modules\//, '')
    .replace(/^.*\/(src|bench)\//, '$1/')
    .replace(/^file:\/\//, '');
  return `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`.trim();
}

/** Self time per frame and inclusive time under frames whose label matches one of `under`. */
export function summarise(
  profile: Profile,
  under: RegExp[],
  lastMs: number,
): { total: number; idle: number; top: [string, number][]; inclusive: [string, number][] } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  // Only the last `lastMs` of the profile (the measured load, not start-up and warm-up).
  const at: number[] = [];
  let clock = 0;
  for (const delta of profile.timeDeltas) at.push((clock += delta));
  const from = clock - lastMs * 1000;
  const selfCount = new Map<number, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    if (at[i]! < from) return;
    total++;
    selfCount.set(id, (selfCount.get(id) ?? 0) + 1);
  });
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let idle = 0;
  for (const [id, count] of selfCount) {
    const node = byId.get(id)!;
    const name = label(node);
    if (node.callFrame.functionName === '(idle)') {
      idle += count;
      continue;
    }
    self.set(name, (self.get(name) ?? 0) + count);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = label(byId.get(at)!);
      for (const pattern of under) {
        if (pattern.test(frame) && !seen.has(pattern.source)) {
          seen.add(pattern.source);
          inclusive.set(pattern.source, (inclusive.get(pattern.source) ?? 0) + count);
        }
      }
    }
  }
  return { total, idle, top: [...self].sort((a, b) => b[1] - a[1]).slice(0, 25), inclusive: [...inclusive].sort((a, b) => b[1] - a[1]) };
}

/** The one .cpuprofile file node wrote into `dir`. */
export function readProfile(dir: string): Profile {
  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no .cpuprofile in ${dir}`);
  return JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
}

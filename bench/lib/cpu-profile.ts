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

/** The profile's nodes by id, each node's parent, and whether sample i is in the last `lastMs` (the measured load). */
function walk(profile: Profile, lastMs: number) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const at: number[] = [];
  let clock = 0;
  for (const delta of profile.timeDeltas) {
    clock += delta;
    at.push(clock);
  }
  const from = clock - lastMs * 1000;
  return { byId, parent, measured: (i: number) => at[i]! >= from };
}

/** Self time per frame and inclusive time under frames whose label matches one of `under`. */
export function summarise(
  profile: Profile,
  under: RegExp[],
  lastMs: number,
): { total: number; idle: number; top: [string, number][]; inclusive: [string, number][] } {
  const { byId, parent, measured } = walk(profile, lastMs);
  const selfCount = new Map<number, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    if (!measured(i)) return;
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

/**
 * CPU time (µs) under every frame in the last `lastMs` of the profile, idle left out, largest first: the time a
 * function and everything it called took, so a caller's share can be read without knowing its callees' names.
 */
export function inclusiveFrames(profile: Profile, lastMs: number): { busyMicros: number; frames: [string, number][] } {
  const { byId, parent, measured } = walk(profile, lastMs);
  const micros = new Map<string, number>();
  let busyMicros = 0;
  profile.samples.forEach((id, i) => {
    if (!measured(i) || byId.get(id)!.callFrame.functionName === '(idle)') return;
    // A sample stands for the time until the next one.
    const spent = profile.timeDeltas[i + 1] ?? 0;
    busyMicros += spent;
    const seen = new Set<string>();
    for (let node: number | undefined = id; node !== undefined; node = parent.get(node)) {
      const name = label(byId.get(node)!);
      if (seen.has(name)) continue;
      seen.add(name);
      micros.set(name, (micros.get(name) ?? 0) + spent);
    }
  });
  return { busyMicros, frames: [...micros].sort((a, b) => b[1] - a[1]) };
}

/** The one .cpuprofile file node wrote into `dir`. */
export function readProfile(dir: string): Profile {
  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no .cpuprofile in ${dir}`);
  return JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
}

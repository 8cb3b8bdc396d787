// Links between regions: per-direction specs (latency, jitter, duplicates), up/down state and the link faults.
import type { Fault, LinkSpec, Scenario } from './types.ts';

export type LinkFault = Extract<Fault, { kind: 'linkDown' | 'linkUp' | 'partition' | 'heal' | 'flap' }>;

export function isLinkFault(fault: Fault): fault is LinkFault {
  return (
    fault.kind === 'linkDown' || fault.kind === 'linkUp' || fault.kind === 'partition' || fault.kind === 'heal' || fault.kind === 'flap'
  );
}

/** A region's index by name (names sorted as the simulation sorts them). */
export function regionIndex(names: string[], name: string): number {
  const index = names.indexOf(name);
  if (index < 0) throw new Error(`unknown region "${name}" in scenario`);
  return index;
}

export class Links {
  /** up[from][to]: one direction of one link. */
  private readonly up: boolean[][];

  constructor(
    private readonly scenario: Scenario,
    private readonly names: string[],
    private readonly random: () => number,
  ) {
    const n = names.length;
    this.up = Array.from({ length: n }, () => new Array<boolean>(n).fill(true));
  }

  isUp(from: number, to: number): boolean {
    return this.up[from]![to]!;
  }

  spec(from: number, to: number): LinkSpec {
    return this.scenario.links?.[`${this.names[from]}>${this.names[to]}`] ?? this.scenario.link;
  }

  delay(from: number, to: number): number {
    const spec = this.spec(from, to);
    return Math.max(0, Math.round(spec.latencyMs + this.random() * (spec.jitterMs ?? 0)));
  }

  /** Applies a link fault at true time `now`; a flap returns its next toggle, to be scheduled. */
  apply(fault: LinkFault, now: number): { at: number; fault: Fault } | undefined {
    const n = this.names.length;
    switch (fault.kind) {
      case 'linkDown':
      case 'linkUp':
        this.up[regionIndex(this.names, fault.from)]![regionIndex(this.names, fault.to)] = fault.kind === 'linkUp';
        return undefined;
      case 'partition': {
        const group = new Array<number>(n).fill(-1);
        fault.groups.forEach((members, g) => members.forEach((name) => (group[regionIndex(this.names, name)] = g)));
        group.forEach((g, i) => (group[i] = g < 0 ? fault.groups.length + i : g));
        for (let a = 0; a < n; a++) for (let b = 0; b < n; b++) if (group[a] !== group[b]) this.up[a]![b] = false;
        return undefined;
      }
      case 'heal':
        for (const row of this.up) row.fill(true);
        return undefined;
      case 'flap': {
        const from = regionIndex(this.names, fault.from);
        const to = regionIndex(this.names, fault.to);
        this.up[from]![to] = !this.up[from]![to];
        const next = now + Math.max(1, fault.everyMs);
        if (next < fault.until) return { at: next, fault: { ...fault, at: next } };
        return { at: fault.until, fault: { at: fault.until, kind: 'linkUp', from: fault.from, to: fault.to } };
      }
    }
  }
}

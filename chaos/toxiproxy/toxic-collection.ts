// A proxy's toxics: the configured list (what the API shows) and every live link they act on. Every change is
// applied to the live links of that direction before the API call returns.
import { ApiError, toxicNotFound } from './errors.ts';
import type { Link } from './link.ts';
import { toxicKinds } from './toxics/index.ts';
import type { Attributes, Direction, ToxicKind, ToxicSpec } from './toxics/types.ts';

/** Decodes a toxic's attributes from the request body onto `base` (Go merges into the current values). */
export type AttributeDecoder = (kind: ToxicKind, raw: unknown, base: Attributes) => Attributes;

export interface ToxicCreateInput {
  name?: string;
  type?: string;
  stream?: string;
  toxicity?: number;
  attributes?: unknown;
}

export interface ToxicUpdateInput {
  toxicity?: number;
  attributes?: unknown;
}

function parseStream(stream: string): Direction {
  const lower = stream.toLowerCase();
  if (lower === 'upstream' || lower === 'downstream') return lower;
  throw new ApiError(400, 'stream was invalid, can be either upstream or downstream');
}

function zeroAttributes(kind: ToxicKind): Attributes {
  return Object.fromEntries(kind.attributes.map((name) => [name, 0]));
}

export class ToxicCollection {
  private specs: ToxicSpec[] = [];
  private readonly links = new Set<Link>();

  /** Upstream toxics first, then downstream, each in insertion order (as Go lists them). */
  list(): ToxicSpec[] {
    return [...this.chain('upstream'), ...this.chain('downstream')];
  }

  chain(direction: Direction): ToxicSpec[] {
    return this.specs.filter((spec) => spec.direction === direction);
  }

  get(name: string): ToxicSpec {
    const spec = this.specs.find((candidate) => candidate.name === name);
    if (!spec) throw toxicNotFound();
    return spec;
  }

  /** Checks in Go's order: stream, default name, type, name conflict, then attributes. */
  add(input: ToxicCreateInput, decodeAttributes: AttributeDecoder): ToxicSpec {
    const stream = input.stream ?? 'downstream';
    const direction = parseStream(stream);
    const type = input.type ?? '';
    const name = input.name || `${type}_${stream}`;
    const kind = toxicKinds.get(type);
    if (!kind) throw new ApiError(400, 'invalid toxic type');
    if (this.specs.some((spec) => spec.name === name)) throw new ApiError(409, 'toxic already exists');
    const attributes = decodeAttributes(kind, input.attributes, zeroAttributes(kind));
    const spec: ToxicSpec = { name, type, stream, direction, toxicity: input.toxicity ?? 1, attributes };
    this.specs.push(spec);
    for (const link of this.linksOf(direction)) link.add(spec);
    return spec;
  }

  update(name: string, input: ToxicUpdateInput, decodeAttributes: AttributeDecoder): ToxicSpec {
    const current = this.get(name);
    const kind = toxicKinds.get(current.type)!;
    const updated: ToxicSpec = {
      ...current,
      toxicity: input.toxicity ?? current.toxicity,
      attributes: decodeAttributes(kind, input.attributes, { ...current.attributes }),
    };
    this.specs = this.specs.map((spec) => (spec === current ? updated : spec));
    for (const link of this.linksOf(updated.direction)) link.update(updated);
    return updated;
  }

  remove(name: string): void {
    const current = this.get(name);
    this.specs = this.specs.filter((spec) => spec !== current);
    for (const link of this.linksOf(current.direction)) link.remove(name);
  }

  removeAll(): void {
    for (const spec of [...this.specs]) this.remove(spec.name);
  }

  attach(link: Link): void {
    this.links.add(link);
  }

  detach(link: Link): void {
    this.links.delete(link);
  }

  private linksOf(direction: Direction): Link[] {
    return [...this.links].filter((link) => link.direction === direction);
  }
}

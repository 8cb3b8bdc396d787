// One direction of one proxied connection: source socket → toxic stages in chain order → destination.
// The chain can change while data flows: stages are appended at the end, and a removed stage passes data
// through until it is idle and only then leaves the array, so nothing is lost or reordered.
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Stage, type StageHost } from './stage.ts';
import type { Sink } from './sink.ts';
import type { Direction, ToxicSpec } from './toxics/types.ts';

export class Link implements StageHost {
  private readonly stages: Stage[];
  private sourceDone = false;
  private disposed = false;

  constructor(
    readonly direction: Direction,
    private readonly source: Socket,
    private readonly destination: Sink,
    toxics: readonly ToxicSpec[],
  ) {
    this.stages = toxics.map((spec) => new Stage(spec, this));
    source.on('data', (data: Buffer) => this.read(data));
    source.on('end', () => this.finishSource());
    source.on('close', () => this.finishSource());
  }

  next(stage: Stage): Sink {
    const index = this.stages.indexOf(stage);
    return (index >= 0 ? this.stages[index + 1] : undefined) ?? this.destination;
  }

  unlink(stage: Stage): void {
    const index = this.stages.indexOf(stage);
    if (index >= 0) this.stages.splice(index, 1);
    stage.dispose();
  }

  add(spec: ToxicSpec): void {
    if (!this.disposed) this.stages.push(new Stage(spec, this));
  }

  update(spec: ToxicSpec): void {
    this.live(spec.name)?.update(spec);
  }

  remove(name: string): void {
    this.live(name)?.remove();
  }

  dispose(): void {
    this.disposed = true;
    for (const stage of this.stages) stage.dispose();
    this.stages.length = 0;
  }

  private live(name: string): Stage | undefined {
    return this.stages.find((stage) => stage.name === name && !stage.isRemoved);
  }

  private head(): Sink {
    return this.stages[0] ?? this.destination;
  }

  private read(data: Buffer): void {
    const head = this.head();
    head.push({ kind: 'data', data, readAt: performance.now() });
    if (head.hasRoom()) return;
    // Backpressure: stop reading the socket until the first toxic (or the destination) catches up.
    this.source.pause();
    void head.waitRoom().then(() => {
      if (!this.disposed && !this.source.destroyed) this.source.resume();
    });
  }

  private finishSource(): void {
    if (this.sourceDone) return;
    this.sourceDone = true;
    this.head().push({ kind: 'end', reset: false });
  }
}

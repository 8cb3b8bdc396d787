// One toxic acting on one direction of one connection: a queue in front of a runner that processes one item at
// a time and emits into whatever follows it in the link right now (so the chain can change under it).
import { passThrough } from './toxics/noop.ts';
import { toxicKinds } from './toxics/index.ts';
import type { StageContext, ToxicKind, ToxicRunner, ToxicSpec } from './toxics/types.ts';
import { waiters, type Item, type Sink } from './sink.ts';

export interface StageHost {
  /** The sink after this stage in the chain at this moment. */
  next(stage: Stage): Sink;
  /** Called once a removed stage is idle, to take it out of the chain without reordering data. */
  unlink(stage: Stage): void;
}

export class Stage implements Sink {
  readonly name: string;
  private readonly kind: ToxicKind;
  private runner: ToxicRunner;
  private readonly queue: Item[] = [];
  private readonly room = waiters();
  /** Pending sleeps, each with whether a toxic change may cut it short (dispose cuts all). */
  private readonly sleeps = new Map<() => void, boolean>();
  private readonly context: StageContext;
  private running = false;
  private removed = false;
  private ended = false;
  private disposed = false;

  constructor(
    spec: ToxicSpec,
    private readonly host: StageHost,
  ) {
    this.name = spec.name;
    this.kind = toxicKinds.get(spec.type)!;
    this.context = {
      emit: (chunk) => this.emit(chunk),
      end: (options) => this.end(options?.reset ?? false),
      sleep: (ms, options) => this.sleep(ms, options?.interruptible ?? true),
      state: {},
    };
    this.runner = this.startRunner(spec);
  }

  get isRemoved(): boolean {
    return this.removed;
  }

  push(item: Item): void {
    if (this.ended) return;
    this.queue.push(item);
    void this.pump();
  }

  hasRoom(): boolean {
    return this.ended || this.queue.length < this.kind.bufferSize;
  }

  waitRoom(): Promise<void> {
    return this.hasRoom() ? Promise.resolve() : this.room.wait();
  }

  /** New attributes or toxicity: the held chunk is released and the toxic restarts (toxicity is re-rolled). */
  update(spec: ToxicSpec): void {
    if (this.removed || this.ended) return;
    this.stopRunner();
    this.runner = this.startRunner(spec);
  }

  /** Held data is flushed; the stage passes data through until idle, then leaves the chain. */
  remove(): void {
    if (this.removed) return;
    this.removed = true;
    this.stopRunner();
    this.runner = passThrough();
    if (this.kind.closesOnRemove) this.end(false);
    if (!this.running) this.host.unlink(this);
  }

  /** The connection is gone: stop timers and let every waiter go. */
  dispose(): void {
    this.disposed = true;
    this.ended = true;
    this.removed = true;
    this.queue.length = 0;
    this.stopRunner();
    for (const wake of [...this.sleeps.keys()]) wake();
    this.room.release();
  }

  private startRunner(spec: ToxicSpec): ToxicRunner {
    // Toxicity is the chance that this connection is affected, drawn whenever the toxic (re)starts on it.
    const runner = Math.random() < spec.toxicity ? this.kind.createRunner(spec.attributes) : passThrough();
    runner.start?.(this.context);
    return runner;
  }

  private stopRunner(): void {
    this.runner.stop?.();
    for (const [wake, interruptible] of [...this.sleeps]) if (interruptible) wake();
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length > 0 && !this.ended) {
        const item = this.queue.shift()!;
        this.room.release();
        if (item.kind === 'data') {
          await this.runner.data(item, this.context);
        } else if (item.reset) {
          this.end(true);
        } else {
          // A runner that was interrupted while holding the EOF hands it to its successor (bounded: each
          // retry needs another update or removal).
          while (!this.ended && !(await this.runner.end(this.context))) {
            if (this.removed) this.end(false);
          }
        }
      }
    } catch {
      // A runner failure must not leave the link hanging: close it.
      this.end(false);
    } finally {
      this.running = false;
    }
    if (this.removed) this.host.unlink(this);
  }

  private async emit(chunk: { data: Buffer; readAt: number }): Promise<void> {
    if (this.ended) return;
    const next = this.host.next(this);
    next.push({ kind: 'data', data: chunk.data, readAt: chunk.readAt });
    if (!next.hasRoom()) await next.waitRoom();
  }

  private end(reset: boolean): void {
    if (this.ended) return;
    this.ended = true;
    this.queue.length = 0;
    this.room.release();
    this.host.next(this).push({ kind: 'end', reset });
  }

  private sleep(ms: number, interruptible: boolean): Promise<boolean> {
    if (ms <= 0) return Promise.resolve(true);
    if (this.disposed) return Promise.resolve(false);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const wake = () => {
        if (timer) clearTimeout(timer);
        this.sleeps.delete(wake);
        resolve(false);
      };
      if (Number.isFinite(ms)) {
        timer = setTimeout(() => {
          this.sleeps.delete(wake);
          resolve(true);
        }, ms);
      }
      this.sleeps.set(wake, interruptible);
    });
  }
}

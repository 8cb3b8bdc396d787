// The contract between a link's pipeline and the toxics. A toxic kind describes its attributes; a runner is
// one toxic acting on one direction of one connection.

export type Direction = 'upstream' | 'downstream';

/** A piece of the byte stream with the time it was read from the source (ms, performance.now()). */
export interface Chunk {
  data: Buffer;
  readAt: number;
}

/** What a runner can do with the stream it sits on. */
export interface StageContext {
  /** Forward a chunk to the next toxic (or the destination); resolves once the next one has room again. */
  emit(chunk: Chunk): Promise<void>;
  /** Close the link from here: later data is dropped; `reset` closes both sockets with a TCP RST. */
  end(options?: { reset?: boolean }): void;
  /**
   * Wait `ms` (Infinity waits for an interrupt). Resolves `true` when the time passed and `false` when the toxic
   * was interrupted (updated, removed, or the connection died), so that the runner can forward what it holds.
   */
  sleep(ms: number, options?: { interruptible?: boolean }): Promise<boolean>;
  /** Per-connection state of this toxic; survives updates (limit_data counts bytes in it). */
  readonly state: Record<string, number>;
}

export interface ToxicRunner {
  /** One chunk in this direction; forward whatever survives with `ctx.emit`. */
  data(chunk: Chunk, ctx: StageContext): Promise<void> | void;
  /**
   * The source reached EOF (after every earlier chunk went through). Forward it with `ctx.end()`.
   * Return `false` when interrupted before closing, to have the (updated) toxic handle the EOF again.
   */
  end(ctx: StageContext): Promise<boolean> | boolean;
  /** The toxic started on this connection (attached or updated). */
  start?(ctx: StageContext): void;
  /** The toxic stops on this connection (updated, removed or the connection closed): release timers. */
  stop?(): void;
}

export type Attributes = Record<string, number>;

export interface ToxicKind {
  /** Attribute names in the order the Go server emits them, all integers defaulting to 0. */
  readonly attributes: readonly string[];
  /** Chunks that may queue in front of the toxic before the source is paused (Go: latency buffers 1024). */
  readonly bufferSize: number;
  /** Removing the toxic closes the connection even where toxicity chose pass-through (Go's cleanup hook). */
  readonly closesOnRemove?: boolean;
  createRunner(attributes: Attributes): ToxicRunner;
}

/** The configured toxic as the API shows it. */
export interface ToxicSpec {
  name: string;
  type: string;
  /** As the caller spelled it (`Upstream` stays `Upstream`); `direction` is the parsed value. */
  stream: string;
  direction: Direction;
  toxicity: number;
  attributes: Attributes;
}

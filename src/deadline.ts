// Bounding how long one piece of work may take, in one place: the decision deadline, gossip adds, background
// Redis calls of the federation and start-up questions to peers.

/** The work did not settle within its bound. */
export class DeadlineExceededError extends Error {
  constructor(
    readonly what: string,
    readonly ms: number,
  ) {
    super(`${what} timed out after ${ms} ms`);
    this.name = 'DeadlineExceededError';
  }
}

/**
 * Settles as `work` does, or rejects with DeadlineExceededError after `ms`. One promise and one timer (a race plus
 * `finally` would allocate three more promises: this runs once per decision).
 */
export function withDeadline<T>(work: Promise<T>, ms: number, what = 'operation'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineExceededError(what, ms)), ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** Settles as `work` does, or resolves with `fallback` after `ms` (for work whose lateness is an answer). */
export function orAfter<T, F>(work: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  return withDeadline(work, ms).catch((error: unknown) => {
    if (error instanceof DeadlineExceededError) return fallback;
    throw error;
  });
}

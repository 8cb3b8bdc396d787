// Errors at the engine boundary and how the resilient wrapper tells them apart: a store failure (Redis down or
// past the deadline) is decided by the fail modes; anything else is thrown to the caller.
import { DeadlineExceededError } from '../deadline.ts';

/**
 * Redis did not answer in time or answered with an error: the store cannot decide this request. The Redis engine
 * throws it; the resilient engine turns it into the rule's fail mode.
 *
 * @example
 * ```ts
 * try {
 *   await redisEngine.decide(request);
 * } catch (error) {
 *   if (error instanceof StoreUnavailableError) console.warn('Redis down:', error.message);
 *   else throw error;
 * }
 * ```
 */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The message of anything thrown (ioredis rejects with Errors, but a script or a caller may throw anything). */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** True when the store could not decide (unavailable or past the deadline): the fail modes decide instead. */
export function isStoreFailure(error: unknown): boolean {
  return error instanceof StoreUnavailableError || error instanceof DeadlineExceededError;
}

/** The `kind` label of a failed Redis command: `timeout` when the error (or its cause) reads as one. */
export function errorKind(error: unknown): 'timeout' | 'unavailable' {
  const text =
    error instanceof Error ? `${error.name} ${error.message} ${String((error as { cause?: unknown }).cause ?? '')}` : String(error);
  return /timed? ?out|deadline/i.test(text) ? 'timeout' : 'unavailable';
}

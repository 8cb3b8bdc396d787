// Errors at the engine boundary. The resilient wrapper turns StoreUnavailableError into a fail-mode decision.

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

/** The request itself is unacceptable (e.g. an oversized API key): a 4xx, never a store problem. */
export class BadRequestError extends Error {
  override readonly name = 'BadRequestError';
}

/** The message of anything thrown (ioredis rejects with Errors, but a script or a caller may throw anything). */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

// The circuit breaker around the region's Redis: its health probe runs under the decision deadline and is
// counted like any other Redis command (duration, errors by kind).
import { performance } from 'node:perf_hooks';
import { withDeadline } from '../deadline.ts';
import type { Logger } from '../log.ts';
import { redisCommandSeconds, redisErrorsTotal } from '../metrics.ts';
import { createBreaker, type Breaker, type BreakerSettings } from './breaker.ts';
import { errorKind } from './errors.ts';

export interface StoreBreakerOptions {
  settings: BreakerSettings;
  region: string;
  /** Health check used by the open breaker (PING). */
  probe: () => Promise<unknown>;
  /** Bound on one probe. */
  deadlineMs: number;
  logger: Logger;
  /** Called each time the breaker closes (Redis answers again). */
  onClosed: () => void;
}

export function createStoreBreaker(options: StoreBreakerOptions): Breaker {
  const timedProbe = async () => {
    const started = performance.now();
    try {
      return await withDeadline(options.probe(), options.deadlineMs);
    } catch (error) {
      redisErrorsTotal.inc({ command: 'ping', kind: errorKind(error) });
      throw error;
    } finally {
      redisCommandSeconds.observe({ command: 'ping' }, (performance.now() - started) / 1000);
    }
  };
  return createBreaker({
    settings: options.settings,
    probe: timedProbe,
    logger: options.logger,
    region: options.region,
    onTransition: (state) => {
      if (state === 'closed') options.onClosed();
    },
  });
}

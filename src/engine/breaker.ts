// Circuit breaker in front of the region's Redis. Closed: every decision goes to Redis and consecutive
// failures are counted. Open: no Redis call on the request path at all (a dead Redis costs nothing per
// request); a timer PINGs Redis every probeIntervalMs and closes the breaker only after successThreshold
// consecutive successful probes, so one lucky PING during a flapping failover does not close it.
import type { Logger } from '../log.ts';
import { breakerState, breakerTransitionsTotal } from '../metrics.ts';
import { errorMessage } from './errors.ts';

export type BreakerState = 'closed' | 'open';

export interface BreakerSettings {
  failureThreshold: number;
  probeIntervalMs: number;
  successThreshold: number;
}

export interface Breaker {
  readonly state: BreakerState;
  /** Why the breaker is open (the last failure), for /readyz. */
  readonly reason: string | undefined;
  recordSuccess(): void;
  recordFailure(error: unknown): void;
  /** Stop probing (shutdown). */
  stop(): void;
}

export interface BreakerOptions {
  settings: BreakerSettings;
  /** One health check; resolves when Redis answered. Must be bounded in time (the command timeout). */
  probe: () => Promise<unknown>;
  logger: Logger;
  /** Label for metrics and logs. */
  region: string;
  /** Called after every transition (the resilient engine drops its local fallback state on close). */
  onTransition?: (state: BreakerState) => void;
}

export function createBreaker({ settings, probe, logger, region, onTransition }: BreakerOptions): Breaker {
  let state: BreakerState = 'closed';
  let failures = 0;
  let probeSuccesses = 0;
  let reason: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  let stopped = false;
  breakerState.set({ region }, 0);

  const runProbe = async () => {
    if (probing || state !== 'open') return;
    probing = true;
    try {
      await probe();
      probeSuccesses += 1;
      logger.debug({ event: 'breaker.probe', ok: true, probeSuccesses, needed: settings.successThreshold }, 'breaker probe succeeded');
      if (probeSuccesses >= settings.successThreshold) close();
    } catch (error) {
      if (probeSuccesses > 0) logger.debug({ event: 'breaker.probe', ok: false, error: errorMessage(error) }, 'breaker probe failed');
      probeSuccesses = 0;
      reason = errorMessage(error);
    } finally {
      probing = false;
    }
  };

  const open = (error: unknown) => {
    state = 'open';
    probeSuccesses = 0;
    reason = errorMessage(error);
    breakerState.set({ region }, 1);
    breakerTransitionsTotal.inc({ region, to: 'open' });
    logger.warn(
      { event: 'breaker.open', region, consecutiveFailures: failures, reason, probeIntervalMs: settings.probeIntervalMs },
      'circuit breaker opened: Redis is unavailable, decisions follow the fail mode',
    );
    if (!stopped) {
      timer = setInterval(() => void runProbe(), settings.probeIntervalMs);
      timer.unref();
    }
    onTransition?.('open');
  };

  const close = () => {
    state = 'closed';
    failures = 0;
    probeSuccesses = 0;
    reason = undefined;
    if (timer) clearInterval(timer);
    timer = undefined;
    breakerState.set({ region }, 0);
    breakerTransitionsTotal.inc({ region, to: 'closed' });
    logger.info({ event: 'breaker.close', region, successfulProbes: settings.successThreshold }, 'circuit breaker closed: Redis decides again');
    onTransition?.('closed');
  };

  return {
    get state() {
      return state;
    },
    get reason() {
      return reason;
    },
    recordSuccess() {
      if (state === 'closed') failures = 0;
    },
    recordFailure(error) {
      if (state === 'open') return;
      failures += 1;
      reason = errorMessage(error);
      if (failures >= settings.failureThreshold) open(error);
    },
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}

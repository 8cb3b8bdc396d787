// Circuit breaker in front of the region's Redis. Closed: every decision goes to Redis, and the outcome of
// each call is sampled over a sliding window (cockatiel's SamplingBreaker). The breaker opens when Redis is
// failing, not when one call was slow: at least `failureThreshold` failed or timed-out calls in the last
// `samplingWindowMs`, AND failures above `failureRatio` of all calls in that window. Under saturating load a
// few late replies are a small ratio and keep it closed; a dead or stalled Redis fails every call and opens it.
// Open: no Redis call on the request path at all (a dead Redis costs nothing per request); a timer PINGs
// Redis every probeIntervalMs and closes the breaker only after successThreshold consecutive successful
// probes, so one lucky PING during a flapping failover does not close it.
import { CircuitState, SamplingBreaker } from 'cockatiel';
import type { Logger } from '../log.ts';
import { breakerState, breakerTransitionsTotal } from '../metrics.ts';
import { errorMessage } from './errors.ts';

export type BreakerState = 'closed' | 'open';

export interface BreakerSettings {
  /** Fewest failed calls within the sampling window that can open the breaker (also its minimum number of calls). */
  failureThreshold: number;
  /** Share of failed or timed-out calls within the sampling window above which the breaker opens (0 < r < 1). */
  failureRatio: number;
  /** The sliding window calls are sampled over. */
  samplingWindowMs: number;
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
  /** Called after every transition (the resilient engine settles its local fallback admissions on close). */
  onTransition?: (state: BreakerState) => void;
}

interface SamplingCounts {
  currentFailures: number;
  currentSuccesses: number;
}

export function createBreaker({ settings, probe, logger, region, onTransition }: BreakerOptions): Breaker {
  let state: BreakerState = 'closed';
  let probeSuccesses = 0;
  let reason: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  let stopped = false;
  // minimumRps such that the window must hold at least failureThreshold calls before the ratio counts
  // (cockatiel opens unless calls < window · minimumRps; half a call below the threshold absorbs float error).
  const sampler = new SamplingBreaker({
    threshold: settings.failureRatio,
    duration: settings.samplingWindowMs,
    minimumRps: ((settings.failureThreshold - 0.5) * 1_000) / settings.samplingWindowMs,
  });
  const counts = () => sampler.state as SamplingCounts;
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

  const open = (error: unknown, failures: number, calls: number) => {
    state = 'open';
    probeSuccesses = 0;
    reason = errorMessage(error);
    breakerState.set({ region }, 1);
    breakerTransitionsTotal.inc({ region, to: 'open' });
    logger.warn(
      {
        event: 'breaker.open',
        region,
        failures,
        calls,
        windowMs: settings.samplingWindowMs,
        reason,
        probeIntervalMs: settings.probeIntervalMs,
      },
      'circuit breaker opened: Redis is failing, decisions follow the fail mode',
    );
    if (!stopped) {
      timer = setInterval(() => void runProbe(), settings.probeIntervalMs);
      timer.unref();
    }
    onTransition?.('open');
  };

  const close = () => {
    state = 'closed';
    probeSuccesses = 0;
    reason = undefined;
    if (timer) clearInterval(timer);
    timer = undefined;
    // A successful half-open call: the sampling windows start empty (cockatiel resets them).
    sampler.success(CircuitState.HalfOpen);
    breakerState.set({ region }, 0);
    breakerTransitionsTotal.inc({ region, to: 'closed' });
    logger.info(
      { event: 'breaker.close', region, successfulProbes: settings.successThreshold },
      'circuit breaker closed: Redis decides again',
    );
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
      if (state === 'closed') sampler.success(CircuitState.Closed);
    },
    recordFailure(error) {
      if (state === 'open') return;
      reason = errorMessage(error);
      if (!sampler.failure(CircuitState.Closed)) return;
      const { currentFailures, currentSuccesses } = counts();
      if (currentFailures >= settings.failureThreshold) open(error, currentFailures, currentFailures + currentSuccesses);
    },
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}

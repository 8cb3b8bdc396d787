// Circuit breaker in front of the region's Redis. Closed: every decision goes to Redis, and the outcome of
// each call is counted over a sliding window (a ring of buckets, below). The breaker opens when Redis is
// failing, not when one call was slow: at least `failureThreshold` failed or timed-out calls in the last
// `samplingWindowMs`, AND failures above `failureRatio` of all calls in that window. Under saturating load a
// few late replies are a small ratio and keep it closed; a dead or stalled Redis fails every call and opens it.
// Open: no Redis call on the request path at all (a dead Redis costs nothing per request); a timer PINGs
// Redis every probeIntervalMs and closes the breaker only after successThreshold consecutive successful
// probes, so one lucky PING during a flapping failover does not close it.
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

/**
 * Calls and failures over the last `windowMs`, kept in a ring of buckets (at least 5, at most 1 s each). When a
 * call opens a new bucket, every bucket that started `windowMs` or more ago is emptied, so the totals never hold
 * a call older than the window plus one bucket, however sparse the traffic.
 */
export class SamplingWindow {
  private readonly buckets: { startedAt: number; failures: number; successes: number }[];
  private readonly bucketMs: number;
  private readonly windowMs: number;
  private current = 0;
  /** Failed calls in the window. */
  failures = 0;
  /** Successful calls in the window. */
  successes = 0;

  constructor(windowMs: number) {
    const count = Math.max(5, Math.ceil(windowMs / 1_000));
    this.windowMs = windowMs;
    this.bucketMs = Math.round(windowMs / count);
    this.buckets = Array.from({ length: count }, () => ({ startedAt: 0, failures: 0, successes: 0 }));
  }

  /** Counts one call's outcome at `now` (ms). */
  record(ok: boolean, now = Date.now()): void {
    let bucket = this.buckets[this.current]!;
    if (now - bucket.startedAt >= this.bucketMs) {
      this.current = (this.current + 1) % this.buckets.length;
      for (const [i, old] of this.buckets.entries()) {
        if (i !== this.current && now - old.startedAt < this.windowMs) continue;
        this.failures -= old.failures;
        this.successes -= old.successes;
        Object.assign(old, { startedAt: 0, failures: 0, successes: 0 });
      }
      bucket = this.buckets[this.current]!;
      bucket.startedAt = now;
    }
    if (ok) {
      bucket.successes += 1;
      this.successes += 1;
    } else {
      bucket.failures += 1;
      this.failures += 1;
    }
  }

  /** Empties the window (a fresh sample after the breaker closes). */
  reset(): void {
    this.failures = 0;
    this.successes = 0;
    for (const bucket of this.buckets) Object.assign(bucket, { startedAt: 0, failures: 0, successes: 0 });
  }
}

export function createBreaker({ settings, probe, logger, region, onTransition }: BreakerOptions): Breaker {
  let state: BreakerState = 'closed';
  let probeSuccesses = 0;
  let reason: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  let stopped = false;
  const sample = new SamplingWindow(settings.samplingWindowMs);
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
    // The probes' success is the first call of a fresh sample.
    sample.reset();
    sample.record(true);
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
      if (state === 'closed') sample.record(true);
    },
    recordFailure(error) {
      if (state === 'open') return;
      reason = errorMessage(error);
      sample.record(false);
      const { failures, successes } = sample;
      const calls = failures + successes;
      if (failures >= settings.failureThreshold && failures > settings.failureRatio * calls) open(error, failures, calls);
    },
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}

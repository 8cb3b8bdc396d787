// Writes what the local fallback admitted into Redis, against the windows it was admitted in, so this region's
// later decisions and, through gossip, the peers count it. Runs when the breaker closes, and after the next
// successful Redis decision when the fallback admitted while the breaker stayed closed; what fails stays unsettled
// and is retried after the next successful Redis decision (or the next close).
import { withDeadline } from '../deadline.ts';
import type { Logger } from '../log.ts';
import { fallbackSettledTotal } from '../metrics.ts';
import { errorMessage } from './errors.ts';
import { asSettler, type EngineInUse } from './inner-engine.ts';
import type { LocalFallback } from './local-fallback.ts';

export interface FallbackSettlement {
  /** Settles what is unsettled now (or joins the settlement in flight); never rejects. */
  settle(): Promise<void>;
  /** Settles again if the last settlement failed, or local admissions are waiting (markPending). */
  retryIfFailed(): void;
  /** Local admissions were made while the breaker stayed closed: settle after the next successful decision. */
  markPending(): void;
}

export interface FallbackSettlementOptions {
  local: LocalFallback;
  /** Read at each settlement: the inner engine in force writes. */
  current: Readonly<EngineInUse>;
  deadlineMs: number;
  now: () => number;
  log: Logger;
}

export function createFallbackSettlement({ local, current, deadlineMs, now, log }: FallbackSettlementOptions): FallbackSettlement {
  let settling: Promise<void> | undefined;
  let settleAgain = false;
  const settle = (): Promise<void> => {
    settleAgain = false;
    if (settling) return settling;
    const items = local.unsettled(now());
    const decider = asSettler(current.inner);
    if (items.length === 0 || !decider) {
      local.prune(now());
      return Promise.resolve();
    }
    settling = withDeadline(decider.settle(items), deadlineMs)
      .then(() => {
        local.settled(items);
        fallbackSettledTotal.inc(items.reduce((sum, item) => sum + item.count, 0));
        log.info(
          { event: 'fallback.settled', keys: items.length, admissions: items.reduce((sum, item) => sum + item.count, 0) },
          'local fallback admissions written to Redis',
        );
      })
      .catch((error: unknown) => {
        settleAgain = true;
        log.warn(
          { event: 'fallback.settle_failed', keys: items.length, error: errorMessage(error) },
          'could not write local fallback admissions to Redis; retried after the next successful decision',
        );
      })
      .finally(() => {
        settling = undefined;
        local.prune(now());
      });
    return settling;
  };
  return {
    settle,
    retryIfFailed() {
      if (settleAgain) void settle();
    },
    markPending() {
      settleAgain = true;
    },
  };
}

// Giving concurrency leases back: the local fallback's own at once, Redis's under the deadline. A failed or
// skipped Redis release is never an error: an unreleased lease expires after the rule's leaseTtl.
import { performance } from 'node:perf_hooks';
import { withDeadline } from '../deadline.ts';
import type { Logger } from '../log.ts';
import { redisCommandSeconds, redisErrorsTotal } from '../metrics.ts';
import type { Breaker } from './breaker.ts';
import { errorKind } from './errors.ts';
import type { EngineInUse } from './inner-engine.ts';
import type { LocalFallback } from './local-fallback.ts';
import type { Lease } from './types.ts';

export interface LeaseReleaseContext {
  local: LocalFallback;
  /** Read at each release: the inner engine in force releases. */
  current: Readonly<EngineInUse>;
  breaker: Breaker;
  deadlineMs: number;
  log: Logger;
}

/** Releases `leases`; resolves once done or given up (never rejects on a store failure). */
export async function releaseLeases(context: LeaseReleaseContext, leases: readonly Lease[]): Promise<void> {
  const remote = context.local.release(leases);
  // An open breaker means no Redis calls.
  if (remote.length === 0 || context.breaker.state === 'open') return;
  const started = performance.now();
  try {
    await withDeadline(context.current.inner.release(remote), context.deadlineMs, 'lease release');
  } catch (error) {
    redisErrorsTotal.inc({ command: 'release', kind: errorKind(error) });
    context.log.debug(
      { event: 'release.failed', leases: remote.length, error: (error as Error).message },
      'lease release failed; leases expire by TTL',
    );
  } finally {
    redisCommandSeconds.observe({ command: 'release' }, (performance.now() - started) / 1000);
  }
}

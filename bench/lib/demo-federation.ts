// The three in-process regions the federation probes run (test/support/federation.ts): the per-key token bucket of
// regions/*.yaml (1,000/min, fail open), budget 5%, sync 100 ms; `maxWaitMs` as the caller asks; the over-limit
// cache on, as the service runs it.
import { startTestFederation } from '../../test/support/federation.ts';

/**
 * Three real redis-servers and federations with the demo's per-key rule.
 *
 * @example
 * const fed = await startDemoFederation({ maxWaitMs: 500 });
 * await fed.region('a').engine.decide({ apiKey: 'k', ip: '', method: 'GET', path: '/' });
 */
export function startDemoFederation(options: { maxWaitMs?: number } = {}): ReturnType<typeof startTestFederation> {
  return startTestFederation({
    syncIntervalMs: 100,
    leakageBudget: '5%',
    overLimitCache: true,
    rules: [
      {
        name: 'per-key',
        match: { identity: 'apiKey' },
        by: ['apiKey'],
        algorithm: 'tokenBucket',
        limit: 1000,
        period: '1m',
        failMode: 'open',
        ...(options.maxWaitMs === undefined ? {} : { maxWaitMs: options.maxWaitMs }),
      },
    ],
  });
}

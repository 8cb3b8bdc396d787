// Envoy's headers from a fail-open decision (Redis down, nothing counted): no remaining count, marked degraded;
// from a counted one, the federation's remaining quota as this region sees it.
import { describe, expect, it } from 'vitest';
import type { RuleOutcome } from '../../src/engine/types.ts';
import { descriptorStatus, rateLimitHeadersDraft03 } from '../../src/grpc/answer.ts';

const outcome = (over: Partial<RuleOutcome>): RuleOutcome => ({
  rule: 'per-key',
  algorithm: 'fixedWindow',
  allowed: true,
  limit: 1000,
  remaining: 1000,
  resetAtMs: 61_000,
  retryAfterMs: 0,
  periodMs: 60_000,
  shadow: false,
  failMode: 'open',
  source: 'fail-open',
  ...over,
});

describe('rateLimitHeadersDraft03', () => {
  it('reports no remaining count for a fail-open outcome and marks it', () => {
    expect(rateLimitHeadersDraft03(outcome({}), true, 1_000)).toEqual([
      { key: 'x-ratelimit-limit', value: '1000, 1000;w=60;name="per-key"' },
      { key: 'x-ratelimit-degraded', value: 'fail-open' },
    ]);
  });

  it('reports remaining and reset for a counted outcome', () => {
    expect(rateLimitHeadersDraft03(outcome({ source: 'redis', remaining: 998 }), true, 1_000)).toEqual([
      { key: 'x-ratelimit-limit', value: '1000, 1000;w=60;name="per-key"' },
      { key: 'x-ratelimit-remaining', value: '998' },
      { key: 'x-ratelimit-reset', value: '60' },
    ]);
  });

  it("reports the federation's remaining quota, in the headers and in limit_remaining", () => {
    const federated = outcome({ source: 'redis', remaining: 348, quotaRemaining: 999 });
    expect(rateLimitHeadersDraft03(federated, true, 1_000)).toContainEqual({ key: 'x-ratelimit-remaining', value: '999' });
    const status = descriptorStatus({ allowed: true, outcomes: [federated], binding: federated, leases: [] }, 1_000);
    expect(status.limit_remaining).toBe(999);
  });
});

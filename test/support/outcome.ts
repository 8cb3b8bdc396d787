// One rule's verdict for tests that feed decisions to code above the engine: defaults for every field, overridden
// per test.
import type { RuleOutcome } from '../../src/engine/types.ts';

/** A RuleOutcome of rule 'r' (fixed window, limit 10, nothing left, decided by Redis), with `fields` over it. */
export function ruleOutcome(fields: Partial<RuleOutcome> = {}): RuleOutcome {
  return {
    rule: 'r',
    algorithm: 'fixedWindow',
    allowed: true,
    limit: 10,
    remaining: 0,
    resetAtMs: 0,
    retryAfterMs: 0,
    periodMs: 60_000,
    shadow: false,
    failMode: 'open',
    source: 'redis',
    ...fields,
  };
}

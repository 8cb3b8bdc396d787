// One limiter's trace → the numbers a report shows.
import { REGIONS, type Decision, type LimiterResult, type Policy, type RegionName, type RuleKind } from '../types.ts';
import { exactBucket, exactWindow, underAdmission } from './exact.ts';
import { bucketLeakage, windowLeakage } from './leakage.ts';

export function summarize(
  decisions: readonly Decision[],
  policy: Policy,
  rules: readonly RuleKind[] = ['window', 'bucket'],
): LimiterResult {
  const of = (rule: RuleKind) => decisions.filter((d) => d.rule === rule);
  const answered = decisions.filter((d) => d.outcome !== 'error').length;
  const limited = decisions.filter((d) => d.outcome === 'limited').length;
  const bucketRate = policy.bucketLimit / policy.bucketPeriodMs;
  const has = (rule: RuleKind) => rules.includes(rule) && of(rule).length > 0;
  return {
    requests: decisions.length,
    admitted: decisions.filter((d) => d.outcome === 'admitted').length,
    limited,
    errors: decisions.length - answered,
    rate429: answered === 0 ? 0 : (100 * limited) / answered,
    leakage: {
      window: has('window') ? windowLeakage(of('window'), policy.windowLimit) : null,
      bucket: has('bucket') ? bucketLeakage(of('bucket'), policy.bucketBurst, bucketRate) : null,
    },
    underAdmission: {
      window: has('window') ? underAdmission(exactWindow(of('window'), policy.windowLimit)) : null,
      bucket: has('bucket') ? underAdmission(exactBucket(of('bucket'), policy.bucketBurst, bucketRate)) : null,
    },
  };
}

/** Admissions per region in bins of `binMs`, from 0 to `durationMs` or the last decision if later. */
export function admissionsTimeline(decisions: readonly Decision[], durationMs: number, binMs: number): Record<RegionName, number[]> {
  const end = Math.max(durationMs, ...decisions.map((d) => d.t));
  const count = Math.max(1, Math.ceil(end / binMs));
  const bins = Object.fromEntries(REGIONS.map((region) => [region, new Array<number>(count).fill(0)])) as Record<RegionName, number[]>;
  for (const decision of decisions) {
    if (decision.outcome !== 'admitted') continue;
    const index = Math.min(count - 1, Math.max(0, Math.floor(decision.t / binMs)));
    bins[decision.region][index]! += 1;
  }
  return bins;
}

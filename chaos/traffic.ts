// The request schedule of a run, fixed by the seed before anything starts: the same seed and scenario always
// send the same requests (key, rule, region) at the same offsets. Arrivals are Poisson. A region removed from the
// federation gets no requests after its removal: they go to the regions left.
import { prng } from '../test/support/simulation/index.ts';
import { REGIONS, type ChaosFault, type RegionName, type RuleKind, type TrafficPattern, type TrafficSpec } from './types.ts';

export interface PlannedRequest {
  /** ms after the run starts. */
  at: number;
  region: RegionName;
  key: string;
  rule: RuleKind;
}

export const HOT_KEY = 'hot';
export const SINGLE_KEY = 'k1';

export function regionAt(shape: TrafficSpec['shape'], at: number, random: () => number): RegionName {
  switch (shape.kind) {
    case 'even':
      return REGIONS[Math.floor(random() * REGIONS.length)]!;
    case 'region': {
      const named = REGIONS.find((region) => region === shape.region);
      if (!named) throw new Error(`unknown region in traffic shape: ${shape.region}`);
      return named;
    }
    case 'shifting':
      return REGIONS[Math.floor(at / shape.everyMs) % REGIONS.length]!;
    case 'weighted': {
      const total = shape.weights.reduce((sum, weight) => sum + weight, 0);
      let pick = random() * total;
      for (let i = 0; i < REGIONS.length; i++) {
        pick -= shape.weights[i] ?? 0;
        if (pick < 0) return REGIONS[i]!;
      }
      return REGIONS[REGIONS.length - 1]!;
    }
  }
}

function keyFor(spec: TrafficSpec, random: () => number): string {
  if (!spec.hotKey) return SINGLE_KEY;
  if (random() < spec.hotKey.hotShare) return HOT_KEY;
  return `cold-${Math.floor(random() * spec.hotKey.coldKeys)}`;
}

/**
 * A fixed pattern on the one key. Sequential plans are sent one at a time: their `at` offsets only carry the
 * pauses (0 between requests of one region, `pauseMs` before the next region), kept after each answer.
 */
export function planPattern(pattern: TrafficPattern): PlannedRequest[] {
  const plan: PlannedRequest[] = [];
  switch (pattern.kind) {
    case 'burst':
      (['window', 'bucket'] as const).forEach((rule, r) => {
        for (let i = 0; i < pattern.requests; i++) {
          plan.push({
            at: r * pattern.ruleGapMs + (pattern.spreadMs * i) / pattern.requests,
            region: pattern.region,
            key: SINGLE_KEY,
            rule,
          });
        }
      });
      return plan.sort((a, b) => a.at - b.at);
    case 'sequential':
      pattern.regions.forEach((region, index) => {
        for (let i = 0; i < 2 * pattern.perRegion; i++) {
          plan.push({ at: index * pattern.pauseMs, region, key: SINGLE_KEY, rule: i % 2 === 0 ? 'window' : 'bucket' });
        }
      });
      return plan;
  }
}

/** A region that leaves the federation `at` ms into the run (a `regionRemoved` fault). */
export interface Removal {
  region: RegionName;
  at: number;
}

/** The removals among a scenario's faults. */
export function removalsOf(faults: readonly ChaosFault[]): Removal[] {
  return faults.flatMap((fault) => (fault.kind === 'regionRemoved' ? [{ region: fault.region, at: fault.at }] : []));
}

/**
 * The plan with every request planned for a removed region at or after its removal sent to a region left instead,
 * in proportion to the shape's weights of the regions left (even for the other shapes; even as well when those
 * weights are all 0). Its own random stream: the requests before the removal are the plan without it.
 *
 * @example
 * rerouteRemoved(plan, { kind: 'even' }, [{ region: 'ap-south', at: 2_500 }], 1); // ap-south's later requests: us-east or eu-west
 */
export function rerouteRemoved(
  plan: readonly PlannedRequest[],
  shape: TrafficSpec['shape'],
  removals: readonly Removal[],
  seed: number,
): PlannedRequest[] {
  if (removals.length === 0) return [...plan];
  const random = prng((seed ^ 0x2e6d0f1) >>> 0);
  const weightOf = (region: RegionName) => (shape.kind === 'weighted' ? (shape.weights[REGIONS.indexOf(region)] ?? 0) : 1);
  return plan.map((request) => {
    const gone = new Set(removals.filter((removal) => removal.at <= request.at).map((removal) => removal.region));
    if (!gone.has(request.region)) return request;
    const left = REGIONS.filter((region) => !gone.has(region));
    if (left.length === 0) throw new Error(`every region is removed by ${request.at} ms: nowhere to send the traffic`);
    const weights = REGIONS.map((region) => (gone.has(region) ? 0 : weightOf(region)));
    const even = weights.every((weight) => weight === 0);
    const picked = regionAt({ kind: 'weighted', weights: even ? REGIONS.map((r) => (gone.has(r) ? 0 : 1)) : weights }, request.at, random);
    // regionAt falls back to the last region when rounding leaves its pick unspent: never a removed one.
    return { ...request, region: gone.has(picked) ? left.at(-1)! : picked };
  });
}

/** The run's requests; `removals` (removalsOf the faults) send a removed region's later requests elsewhere. */
export function planTraffic(spec: TrafficSpec, durationMs: number, seed: number, removals: readonly Removal[] = []): PlannedRequest[] {
  return rerouteRemoved(planOnAllRegions(spec, durationMs, seed), spec.shape, removals, seed);
}

function planOnAllRegions(spec: TrafficSpec, durationMs: number, seed: number): PlannedRequest[] {
  if (spec.pattern) return planPattern(spec.pattern);
  const random = prng(seed);
  const plan: PlannedRequest[] = [];
  const meanGapMs = 1_000 / spec.ratePerSec;
  // A bound on the loop whatever the rate: at most ten times the expected count.
  const most = Math.ceil((durationMs / meanGapMs) * 10) + 10;
  let at = 0;
  for (let i = 0; i < most; i++) {
    at += -Math.log(1 - random()) * meanGapMs;
    if (at >= durationMs) break;
    const rule: RuleKind = random() < spec.windowShare ? 'window' : 'bucket';
    plan.push({ at, region: regionAt(spec.shape, at, random), key: keyFor(spec, random), rule });
  }
  return plan;
}

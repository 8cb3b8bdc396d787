// The federation simulator's public API (test and chaos-lab tooling, not production code).
export { simulate } from './simulation.ts';
export { prng } from './random.ts';
export type {
  Fault,
  LinkSpec,
  Scenario,
  SimAlgorithm,
  SimDecision,
  SimRegion,
  SimResult,
  SimStats,
  TrafficShape,
  TrafficStream,
  WindowTally,
} from './types.ts';

// The simulation's scenario, result and internal state types.
import type { LeakageBudget } from '../../../src/config/schema.ts';
import type { FastPace } from '../../../src/federation/gossip/fast-pace.ts';
import type { BucketState, EpochSlot, FederationParams, RebalancePolicy, WindowSlot, WindowState } from '../../../src/protocol/index.ts';

export type SimAlgorithm = 'fixedWindow' | 'slidingWindow' | 'tokenBucket';

export interface SimRegion {
  name: string;
  weight?: number;
  /** This region's clock minus true time; keep |offset| ≤ maxClockSkewMs / 2. */
  clockOffsetMs?: number;
}

export interface LinkSpec {
  latencyMs: number;
  /** Uniform extra delay in [0, jitterMs] per message (reorders messages). */
  jitterMs?: number;
  /** Chance that a delivered job is processed a second time, later (at-least-once redelivery). */
  duplicateProbability?: number;
}

export type Fault =
  /** One direction of one link goes down or comes back. */
  | { at: number; kind: 'linkDown' | 'linkUp'; from: string; to: string }
  /** Links between different groups go down in both directions (regions not listed form their own group). */
  | { at: number; kind: 'partition'; groups: string[][] }
  /** Every link up again. */
  | { at: number; kind: 'heal' }
  /** The link from → to toggles every `everyMs` until `until`, ending up. */
  | { at: number; kind: 'flap'; from: string; to: string; everyMs: number; until: number }
  /** The region stops serving; with wipe its Redis loses everything (state, pending sets, queued jobs). */
  | { at: number; kind: 'crash'; region: string; wipe: boolean }
  | { at: number; kind: 'restart'; region: string }
  /** The region's gossip worker stops applying jobs (they stay queued in its Redis) / resumes. */
  | { at: number; kind: 'workerStop' | 'workerStart'; region: string };

export type TrafficShape =
  | { kind: 'even' }
  | { kind: 'region'; region: string }
  /** All traffic in one region at a time, moving to the next region every `everyMs`. */
  | { kind: 'shifting'; everyMs: number }
  | { kind: 'weighted'; weights: number[] };

export interface TrafficStream {
  key: string;
  /** Mean arrivals per second (Poisson). */
  ratePerSec: number;
  shape: TrafficShape;
  cost?: number;
  startMs?: number;
  endMs?: number;
}

export interface Scenario {
  regions: SimRegion[];
  rule: {
    algorithm: SimAlgorithm;
    limit: number;
    periodMs: number;
    burst?: number;
    leakageBudget: LeakageBudget;
  };
  syncIntervalMs: number;
  maxClockSkewMs: number;
  durationMs: number;
  /** Default for every direction; `links["a>b"]` overrides the direction a → b. */
  link: LinkSpec;
  links?: Record<string, LinkSpec>;
  /** A sent job not acknowledged within this long is sent again (default 1000 ms). */
  ackTimeoutMs?: number;
  faults?: Fault[];
  traffic: TrafficStream[];
  rebalance?: Partial<RebalancePolicy>;
  /** True times at which to snapshot every region's own rows and measure when all views include them. */
  probes?: number[];
  /** Check the per-region invariants and the global share sum after every event (slower). */
  audit?: boolean;
  /**
   * The fast lane (publisher.ts FAST_LANE_MS): a key whose change matters now (a region's first admission in a
   * window/epoch, a grant made by a merge or a sweep) goes to every peer at once instead of at the next tick,
   * at most once per this many ms per key, and under the region's pace (src/federation/gossip/fast-pace.ts: a
   * burst of runs, then so many a second; keys sent at one instant are one run). Absent: every key waits for the
   * sync tick.
   */
  fastLaneMs?: number;
  /**
   * rules[].maxWaitMs (src/engine/park.ts): a false denial is decided again 5, 10, 20, 20… ms later until
   * admitted, denied for good or this many ms after its arrival. Absent or 0: answered at once.
   */
  maxWaitMs?: number;
}

export interface SimDecision {
  /** True (virtual) time. */
  t: number;
  /** The deciding region's clock. */
  local: number;
  region: number;
  key: string;
  cost: number;
  allowed: boolean;
  /** Window (or epoch) id by the deciding region's clock. */
  window: number;
}

export interface WindowTally {
  key: string;
  window: number;
  /** Admitted by the federation in this window id (ids by each deciding region's clock). */
  admitted: number;
  /** Admitted by one exact global limiter over the merged trace (ids by true time). */
  exactAdmitted: number;
  demand: number;
}

export interface SimStats {
  requests: number;
  admitted: number;
  /** Requests that arrived at a crashed region (no decision). */
  unserved: number;
  exactAdmitted: number;
  messagesSent: number;
  messagesApplied: number;
  sendFailures: number;
  messagesLost: number;
  windows: WindowTally[];
  /** Max over windows of admitted − limit (window algorithms; 0 when never over). */
  maxWindowOverage: number;
  /** Admission in one region until a peer's view includes it, ms (every admission × peer that resolved). */
  syncLagMs: number[];
  convergence: { probe: number; convergedAt: number | null }[];
  /** Audit only: the largest Σ_r σ_r seen at any instant (token bucket), and invariant violations. */
  maxShareSum: number;
  invariantViolations: string[];
  /** Keys sent on the fast lane (each to every peer). */
  fastSends: number;
  /**
   * Denials while the federation as a whole had room: windows, the deciding region's own view shows
   * G + cost ≤ L (and the window is not forfeited); buckets, the regions' tokens add up to ≥ cost.
   */
  falseDenials: number;
  /** From a region's first denial of a key in a window/epoch until its view next shows a grant to it (ms). */
  timeToGrantMs: number[];
}

export interface SimResult {
  decisions: SimDecision[];
  stats: SimStats;
}

export type KeyState = WindowState | BucketState;
export type Slots = WindowSlot[] | EpochSlot[];

export interface Message {
  from: number;
  to: number;
  key: string;
  version: number;
  slots: Slots;
  /** The sender's incarnation when sent (a wipe makes old acknowledgements meaningless). */
  incarnation: number;
}

export interface RegionSim {
  index: number;
  name: string;
  offset: number;
  params: FederationParams;
  up: boolean;
  workerUp: boolean;
  wiped: boolean;
  incarnation: number;
  fence: number;
  keys: Map<string, KeyState>;
  versions: Map<string, number>;
  /** Per peer: key → version waiting to be delivered. */
  pending: Map<string, number>[];
  /** Per peer: key → the version in flight and when it was sent. */
  outstanding: Map<string, { version: number; sentAt: number }>[];
  /** Jobs delivered to this region's Redis, not yet applied. */
  queue: Message[];
  /** Keys whose view showed a hungry peer: rebalanced again on every sync tick (the sweep). */
  watch: Set<string>;
  /** Fast lane: key → last fast send, and keys with a fast send already scheduled. */
  fastSent: Map<string, number>;
  fastDue: Set<string>;
  /** The fast lane's pace (src/federation/gossip/fast-pace.ts): how many runs the region may send, and when. */
  fastPace: FastPace;
  /** When the region's last fast run went (keys sent at one instant are one run, as the publisher sends them). */
  fastRunAt: number;
}

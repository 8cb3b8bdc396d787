// The federation protocol as pure functions: the specification that lua/*.lua mirrors (a differential test
// compares them) and that the simulation drives. Full argument: docs/federation.md. No I/O: the protocol imports
// only config types, node:crypto (the topology fingerprint) and itself.
//
// Numeric contract with the Lua mirror: every value here is an IEEE double, and every expression that mixes
// products and quotients is written in one fixed order (the Lua evaluates the same order), so both sides
// compute bit-identical results. Integer quantities (counts, share units, transfers) stay below 2^53.
//
// Files, beside their Lua mirrors in lua/includes/:
//   params.ts            share units, REBALANCE, the leakage budget, FederationParams   federation.lua, rebalance.lua
//   slots.ts             window and epoch slots, their join                              federation.lua, rebalance.lua
//   demand.ts            active, quiet, stopped, hungry, free donor                      rebalance.lua
//   window-decide.ts     a window's base, allowance and decision                         window_decide.lua
//   window-rebalance.ts  a window's merge, transfer and sweep                            window_rebalance.lua
//   bucket-share.ts      a bucket's share σ, refill and decision                         bucket_share.lua
//   bucket-rebalance.ts  a bucket's merge, share transfer and sweep                      bucket_rebalance.lua
//   settlement.ts        a refund, the local fallback's settlement                       refund.lua, settle_fallback.lua
//   single-bucket.ts     a single region's token bucket in one number (GCRA)             gcra.lua, bucket_single.lua
//   topology.ts          regions, weights, share units and the fingerprint               (script arguments)
// This index is the protocol's public surface; the helpers the files share among themselves stay out of it.
export {
  decideSingleBucket,
  emissionIntervalUs,
  refundSingleBucket,
  singleBucketFromTokens,
  singleBucketTokens,
  type SingleBucketDecision,
  type SingleBucketRule,
} from './single-bucket.ts';
export {
  bucketGossip,
  bucketHasHungryPeer,
  bucketSweepIdle,
  bucketSweepIdleUntil,
  mergeBucket,
  rebalanceBucket,
  sweepBucket,
} from './bucket-rebalance.ts';
export {
  bucketBudget,
  bucketCapacity,
  bucketFenceEnd,
  bucketQuotaRemaining,
  bucketRate,
  decideBucket,
  epochCells,
  newBucket,
  refill,
  shareAt,
  transfersAllowed,
  type BucketDecision,
  type BucketState,
  viewShare,
} from './bucket-share.ts';
export {
  REBALANCE,
  SHARE_UNITS,
  federationParams,
  portion,
  resolveLeakageBudget,
  scriptBudget,
  shareUnits,
  windowIdAt,
  type FederationParams,
  type Fence,
  type ParamsInput,
  type RebalancePolicy,
} from './params.ts';
export {
  KEPT_WINDOWS,
  emptyEpochSlot,
  emptyWindowSlot,
  joinEpochSlots,
  joinWindowSlots,
  type EpochSlot,
  type MergeResult,
  type Slot,
  type WindowSlot,
} from './slots.ts';
export {
  admissionGossip,
  bucketAdmissionGossip,
  bucketReportTargets,
  bystander,
  fastLaneTargets,
  gossipHorizonMs,
  PACE_MIN_AHEAD,
  peerTalks,
  REPORT_STEP,
  reportDue,
  silentShare,
  windowAdmissionGossip,
  type AdmissionFacts,
  type AdmissionGossip,
  type FastLaneTargets,
} from './admission-gossip.ts';
export { refundBucket, refundWindow, settleWindow, type RefundResult, type SettleResult } from './settlement.ts';
export { ruleFederationParams, topologyOf, type Topology } from './topology.ts';
export {
  decideWindow,
  newWindowState,
  windowAllowance,
  windowBase,
  windowCells,
  windowForfeited,
  windowQuotaRemaining,
  type WindowDecision,
  type WindowState,
} from './window-decide.ts';
export { mergeWindow, rebalanceWindow, sweepWindow, windowGossip, windowHasHungryPeer } from './window-rebalance.ts';
export {
  admitsIn,
  granteesOf,
  marksOfMerge,
  marksPeer,
  mergeMarks,
  ownRowAhead,
  relayTargets,
  relayWorthy,
  type MergeMarks,
} from './merge-gossip.ts';

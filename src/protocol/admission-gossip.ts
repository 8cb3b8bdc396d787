// Which admissions the peers must hear of. Messages only move rights and refresh views (docs/federation.md §2:
// the bound is kept by each region's own check against its allowance), so a key far below its region's share
// needs none: it stays silent. A key turns loud, and is gossiped as before, once it nears its share (the
// watermark), once it runs fast enough to reach its share within a few round trips, or once a peer shows in
// its slot (a peer admitted it there, or allowance moved between them).
// Lua mirror: lua/includes/admission_gossip.lua (admission_gossip).
import { bucketCapacity, epochCells, newBucket, refill, shareAt, type BucketState } from './bucket-share.ts';
import { windowIdAt, type Fence, type FederationParams } from './params.ts';
import type { EpochSlot, WindowSlot } from './slots.ts';
import { windowAllowance, windowCells, type WindowState } from './window-decide.ts';

/** How an admission goes to the peers: not at all, with the next sync round, or on the fast lane now. */
export type AdmissionGossip = 'silent' | 'round' | 'fast';

/** The most of its share a silent key may use: a fraction ω ≤ L/(L+B), so that all silent regions admit ≤ L. */
export const SILENT_SHARE = 0.9;

/** How many sync intervals ahead a key's rate is projected (the horizon H of the burst test)... */
export const HORIZON_SYNC_INTERVALS = 30;
/** ...and at least this long (ms), so that short sync intervals do not silence keys that run at a steady pace. */
export const HORIZON_FLOOR_MS = 10_000;
/**
 * A pace is read only once the region runs this many admissions (of the admission's cost) ahead of its
 * allowance's own pace (AdmissionFacts.ahead): the time since the previous admission is one sample, and among a
 * million quiet keys some pairs always come close together by chance (two requests for one key within H/room, about
 * 30 ms at the defaults). Measured on the token bucket's refill (a key below its share's rate stays near 0): a
 * Poisson key at 1 request/s went loud in 77% of its epochs when three admissions in the epoch were enough, in none
 * at 8 ahead (docs/scale.md §3.1, "Chance pairs").
 */
export const PACE_MIN_AHEAD = 8;

/**
 * A loud key's admissions go to the peers once per report step: when its count in the slot completes a multiple
 * of max(1, floor(REPORT_STEP·share)). The peers' view of the key then lags the truth by less than a step (2% of
 * the region's share), and a hot key sends one report per step instead of one per sync round.
 */
export const REPORT_STEP = 0.02;

/**
 * ω = min(SILENT_SHARE, L/(L+B)): while every region holds a key below ω of its share, the federation admitted
 * at most ω·(L+B) ≤ L, so the global view has nothing to add. 0 without a budget (unbounded: plain gossip).
 */
export function silentShare(params: FederationParams): number {
  if (params.budget === null) return 0;
  return Math.min(SILENT_SHARE, params.limit / (params.limit + params.budget));
}

/** The horizon H (ms) of the burst test for a federation gossiping every `syncIntervalMs`. */
export function gossipHorizonMs(syncIntervalMs: number): number {
  return Math.max(HORIZON_SYNC_INTERVALS * syncIntervalMs, HORIZON_FLOOR_MS);
}

/**
 * Whether a peer of `self` shows in this slot: it admitted there (a count) or moved allowance to or from `self`
 * (a transfer). These are the cells a decision reads anyway.
 */
export function peerTalks(slot: WindowSlot | EpochSlot, self: number): boolean {
  const n = slot.c.length;
  for (let o = 0; o < n; o++) {
    if (o === self) continue;
    if (slot.c[o]! !== 0 || slot.x[o]![self]! !== 0 || slot.x[self]![o]! !== 0) return true;
  }
  return false;
}

/** What admissionGossip needs of one admission, all read before it. */
export interface AdmissionFacts {
  /** A peer shows in the admission's slot (peerTalks). */
  talks: boolean;
  /** This region's count in the admission's slot before it (0: its first admission there). */
  ownBefore: number;
  /**
   * How far the region ran ahead of its allowance's own pace before this admission: a bucket's tokens short of its
   * capacity (the refill runs at the share's rate, so a key that stays below it stays near 0), a window's count (a
   * window's allowance does not refill within the window).
   */
  ahead: number;
  /** This region's last admission (or demand) time in that slot before it; 0 when none. */
  lastAt: number;
  /** What the region may still admit after it: windows its allowance less its count, buckets its tokens. */
  room: number;
  /** The region's whole allowance there: windows l_r, buckets cap_r(σ). */
  share: number;
  /** The admission's cost. */
  cost: number;
  /** silentShare(params). */
  silent: number;
  horizonMs: number;
  now: number;
}

/**
 * How region r's admission goes to the peers.
 *
 * - Loud: when a peer talks about the key, or there is no budget (plain gossip), a first admission in the slot
 *   goes on the fast lane; any other goes with the next round, with a budget only when it completes a report
 *   step (reportDue: the peers' view lags by less than 2% of the share), else it sends nothing.
 * - Silent: r used at most ω of its share (share − room ≤ ω·share) and its pace does not reach the share
 *   within H: it runs fewer than PACE_MIN_AHEAD admissions ahead of its allowance's pace (ahead < 8·cost), or
 *   (now − lastAt)·room > H, the time since its previous admission times what is left.
 * - Otherwise, while no peer shows: the fast lane when this admission crosses the watermark or keeps the pace
 *   below it (the peers see the demand now), the next round once the key is above the watermark already (at a
 *   report step, as above).
 *
 * Silence only delays messages, and when a message is sent is no part of the bound (§2, §3).
 *
 * @example
 * ```ts
 * // 1 of a 350 share used, nobody else talks: silent.
 * admissionGossip({ talks: false, ownBefore: 0, ahead: 0, lastAt: 0, room: 349, share: 350, cost: 1, silent: 0.9, horizonMs: 3_000, now: 1 }); // 'silent'
 * ```
 */
export function admissionGossip(facts: AdmissionFacts): AdmissionGossip {
  const first = facts.ownBefore === 0;
  if (facts.silent === 0) return first ? 'fast' : 'round';
  if (facts.talks) return first ? 'fast' : reportDue(facts) ? 'round' : 'silent';
  const watermark = facts.silent * facts.share;
  const used = facts.share - facts.room;
  const slow = first || facts.ahead < PACE_MIN_AHEAD * facts.cost || (facts.now - facts.lastAt) * facts.room > facts.horizonMs;
  if (used <= watermark && slow) return 'silent';
  // Above the watermark before this admission too: the peers heard of the key when it crossed.
  if (used - facts.cost > watermark) return reportDue(facts) ? 'round' : 'silent';
  return 'fast';
}

/** Whether a loud admission completes a report step (REPORT_STEP) of the region's count in the slot. */
export function reportDue(facts: Pick<AdmissionFacts, 'ownBefore' | 'cost' | 'share'>): boolean {
  const step = Math.max(1, Math.floor(REPORT_STEP * facts.share));
  return Math.floor(facts.ownBefore / step) !== Math.floor((facts.ownBefore + facts.cost) / step);
}

/** admissionGossip of an admission decideWindow made from `state` (before) at `now` for `cost`. */
export function windowAdmissionGossip(
  params: FederationParams,
  state: WindowState,
  now: number,
  cost: number,
  horizonMs: number,
): AdmissionGossip {
  const r = params.self;
  const id = windowIdAt(now, params.periodMs);
  const cells = windowCells(state, id);
  const share = params.budget === null ? Infinity : windowAllowance(params, cells, r);
  return admissionGossip({
    talks: peerTalks(cells, r),
    ownBefore: cells.c[r]!,
    ahead: cells.c[r]!,
    lastAt: cells.t[r]!,
    room: share - cells.c[r]! - cost,
    share,
    cost,
    silent: silentShare(params),
    horizonMs,
    now,
  });
}

/** admissionGossip of an admission decideBucket made from `state` (before; undefined: a new bucket) at `now`. */
export function bucketAdmissionGossip(
  params: FederationParams,
  state: BucketState | undefined,
  fence: Fence,
  now: number,
  cost: number,
  horizonMs: number,
): AdmissionGossip {
  const r = params.self;
  const current = state ?? newBucket(params, fence, now);
  const epoch = windowIdAt(now, params.periodMs);
  const cells = epochCells(current.slots, epoch);
  const tokens = refill(params, current, fence, now);
  const share = bucketCapacity(params, shareAt(params, current.slots, fence, now));
  return admissionGossip({
    // A bucket carries its tokens and its received share over the epoch's edge: a peer that showed in the epoch
    // before still talks of the key (a window's count starts again, so only its own window counts there).
    talks: peerTalks(cells, r) || peerTalks(epochCells(current.slots, epoch - 1), r),
    ownBefore: cells.c[r]!,
    ahead: share - tokens,
    lastAt: cells.t[r]!,
    room: tokens - cost,
    share,
    cost,
    silent: silentShare(params),
    horizonMs,
    now,
  });
}

/** The peers a fast-lane key goes to now: `'all'`, or these region indexes (fastLaneTargets). */
export type FastLaneTargets = readonly number[] | 'all';

/**
 * Where a key on region `self`'s fast lane goes now, from its newest slot: its own count and time there and what it
 * gave each peer there. Every peer when `self` shows demand in the slot (it admitted there, or a false denial
 * refreshed its time): any of them may give. Otherwise the key is on the fast lane for a grant (or a return) `self`
 * made: only the peers it moved allowance to need it now, and the others hear of it with the next sync round (the
 * key stays in their pending sets). A grant so crosses one link at once, not every link; when a message is sent is
 * no part of the bound (§2, §3).
 *
 * @example
 * ```ts
 * // Region 1 of three admitted nothing in the slot and gave 40 to region 0: to region 0 only.
 * fastLaneTargets(0, 0, (d) => (d === 0 ? 40 : 0), 1, 3); // [0]
 * ```
 */
export function fastLaneTargets(own: number, ownAt: number, gave: (d: number) => number, self: number, n: number): FastLaneTargets {
  if (own > 0 || ownAt > 0) return 'all';
  const to: number[] = [];
  for (let d = 0; d < n; d++) if (d !== self && gave(d) > 0) to.push(d);
  return to.length > 0 ? to : 'all';
}

/**
 * Whether peer `o` is a bystander of region `self`'s token bucket in an epoch slot: it admitted nothing there
 * (`c[o]` = 0), it gave `self` at least its whole share (`x[o][self] ≥ units[o]`), and `self` gave it nothing
 * (`x[self][o]` = 0). It can give nothing more and admit nothing beyond its budget, so `self`'s count tells it
 * nothing it acts on: an idle donor that handed a hot region everything. The cells are those a decision reads
 * (load_bucket for a decision: every region's count, the transfers to and from `self`).
 */
export function bystander(slot: EpochSlot, units: readonly number[], self: number, o: number): boolean {
  return slot.c[o]! === 0 && slot.x[self]![o]! === 0 && slot.x[o]![self]! >= units[o]!;
}

/**
 * The peers a token bucket's round report (admissionGossip 'round': a loud key's count at a report step) goes
 * to: every peer but the bystanders of the admission's epoch (`state`: the bucket after the admission). A report
 * to a bystander only refreshed a view it never acts on; the next message it needs still reaches it: what `self`
 * gives it (a return, a grant) marks it as a merge's grantee or a sweep's, a key's first admission in an epoch
 * goes on the fast lane to every peer, and when the bystander talks of the key again (it admits on its budget,
 * or a false denial refreshes its demand) `self`'s merge of its message answers it with `self`'s row
 * (ownRowAhead). When a message is sent is no part of the bound (§2, §3). Windows report to every peer: a
 * window's free donor keeps one request (§2), so it never gave its whole share.
 *
 * @example
 * ```ts
 * // Regions 1 and 2 of three gave region 0 their whole share in this epoch and admitted nothing: no report.
 * bucketReportTargets(params, bucket, now); // []
 * ```
 */
export function bucketReportTargets(params: FederationParams, state: BucketState, now: number): number[] {
  const cells = epochCells(state.slots, windowIdAt(now, params.periodMs));
  const to: number[] = [];
  for (let o = 0; o < params.regions; o++) if (o !== params.self && !bystander(cells, params.units, params.self, o)) to.push(o);
  return to;
}

// Helpers over one region's key state (a window's or a bucket's slots), shared by the simulation and its statistics.
import {
  KEPT_WINDOWS,
  bucketGossip,
  emptyEpochSlot,
  newWindowState,
  windowGossip,
  type BucketState,
  type EpochSlot,
  type FederationParams,
  type WindowState,
} from '../../../src/protocol/index.ts';
import type { KeyState, RegionSim, Slots } from './types.ts';

/** The region's clock at true time `now`. */
export function localTime(now: number, region: RegionSim): number {
  return now + region.offset;
}

/** The slots a state gossips (its whole view). */
export function slotsOf(windowed: boolean, state: KeyState): Slots {
  return windowed ? windowGossip(state as WindowState) : bucketGossip(state as BucketState);
}

export function newWindow(params: FederationParams): WindowState {
  return newWindowState(params.regions);
}

export function newBucketSlots(n: number): EpochSlot[] {
  return Array.from({ length: KEPT_WINDOWS }, () => emptyEpochSlot(n));
}

/** Σ_o x[o][r] in one window/epoch: what r has been given. */
export function received(slots: Slots, window: number, r: number): number {
  let total = 0;
  for (const slot of slots) if (slot.id === window) for (let o = 0; o < slot.x.length; o++) if (o !== r) total += slot.x[o]![r]!;
  return total;
}

export function ownCount(slots: Slots, window: number, origin: number): number {
  for (const slot of slots) if (slot.id === window) return slot.c[origin]!;
  return 0;
}

// Time to grant: from a key's first false denial in a window/epoch (this region's view had headroom, decide.lua's
// flag) to the key's next admission in this region in that same window/epoch, which allowance moved by a peer
// (or, for a token bucket, this region's own refill) made possible. Observed into
// quotafed_federation_time_to_grant_seconds{rule}; a key that is not admitted again in the window is dropped.
import { timeToGrantSeconds } from '../metrics.ts';

export interface TimeToGrant {
  /** A decision of `key` at the script's clock `nowMs` (window/epoch = floor(now / period)). */
  decided(rule: string, key: string, periodMs: number, nowMs: number, allowed: boolean, falseDenial: boolean): void;
  readonly size: number;
}

interface Waiting {
  sinceMs: number;
  windowId: number;
}

/** Tracks at most `maxKeys` waiting keys (the oldest is forgotten first). */
export function createTimeToGrant(maxKeys = 10_000): TimeToGrant {
  const waiting = new Map<string, Waiting>();
  return {
    decided(rule, key, periodMs, nowMs, allowed, falseDenial) {
      const windowId = Math.floor(nowMs / periodMs);
      const entry = waiting.get(key);
      if (allowed) {
        if (entry === undefined) return;
        waiting.delete(key);
        if (entry.windowId === windowId) timeToGrantSeconds.observe({ rule }, Math.max(0, nowMs - entry.sinceMs) / 1000);
        return;
      }
      if (!falseDenial || (entry !== undefined && entry.windowId === windowId)) return;
      if (entry === undefined && waiting.size >= maxKeys) waiting.delete(waiting.keys().next().value as string);
      waiting.set(key, { sinceMs: nowMs, windowId });
    },
    get size() {
      return waiting.size;
    },
  };
}

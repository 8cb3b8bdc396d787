// What the dashboard shows, as data. One snapshot per second goes to every open page over server-sent events;
// the page keeps its own short history for the time-series charts.
import type { Annotations } from './annotations.ts';

export type LinkState = 'up' | 'down' | 'unknown';

export interface RegionView {
  name: string;
  /** The region serving this page. */
  self: boolean;
  /** Normalised share weight (sum 1). */
  weight: number;
}

/** A directed link: `from` sends its consumption to `to` (gossip into `to`'s Redis). */
export interface LinkView {
  from: string;
  to: string;
  state: LinkState;
  /** Admission in `from` until visible in `to`, when the federation measures it. */
  syncLagMs: number | null;
  /** Keys waiting for delivery to `to`. */
  backlog: number | null;
  /** Milliseconds since `from` last heard from `to` (or last reached it). */
  lastHeardAgoMs: number | null;
  /** Why the link is down, in a few words. */
  detail?: string | undefined;
}

export interface EndpointRate {
  endpoint: string;
  /** 429 responses per second over the last sampling interval. */
  rejectedPerSec: number;
  rejectedTotal: number;
  /** Rule decisions per second (all outcomes) over the last sampling interval. */
  decisionsPerSec: number;
}

export interface BreakerView {
  state: 'closed' | 'open' | 'unknown';
  transitions: number;
}

export interface RegionConsumption {
  region: string;
  /** Requests (or tokens) this region admitted in the current window, as this region knows it. */
  consumed: number;
}

/** One key's federated state in the current window, from this region's point of view. */
export interface KeyView {
  label: string;
  rule: string;
  algorithm: string;
  limit: number;
  /** Leakage budget in requests; null for "unbounded". */
  budget: number | null;
  /** Window (or epoch) id the numbers belong to. */
  windowId: number;
  own: number;
  /** Σ over regions of what this region knows each one admitted. */
  global: number;
  views: RegionConsumption[];
  /** This region's escrow allowance l_r: what it may admit without hearing from anyone. */
  allowance: number | null;
  /** What every peer has acknowledged of this region's consumption (min over peers). */
  acknowledged: number | null;
}

/** A rule of the policy in force (it follows a reload). */
export interface RuleView {
  name: string;
  algorithm: string;
  limit: number;
  periodMs: number;
  /** Route patterns it is scoped to; null for every path. */
  endpoints: string[] | null;
  by: string[];
  failMode: string;
  shadow: boolean;
  /** False denials of this rule in this region since it started (quotafed_federation_false_denials_total). */
  falseDenials: number;
  /** Allowance left unused here at window end while a peer was hungry (quotafed_federation_stranded_allowance_total). */
  stranded: number;
}

/** A key among the most denied of a rule in its current window (this process's sketch, src/engine/top-keys.ts). */
export interface TopLimitedKey {
  rule: string;
  /** As GET /admin/keys/top names it (API keys masked unless topKeys.apiKeys is plain). */
  key: string;
  /** Denials counted in the window: an upper bound; the true count is at least denials - error. */
  denials: number;
  error: number;
  /** All denials of the rule in the window. */
  ruleDenials: number;
  /** Epoch ms when the rule's window ends (the counts start again). */
  windowEndMs: number;
}

export interface DashboardSnapshot {
  /** Epoch ms when the snapshot was taken. */
  at: number;
  region: string;
  regions: RegionView[];
  links: LinkView[];
  endpoints: EndpointRate[];
  breaker: BreakerView;
  keys: KeyView[];
  /** The rules in force. */
  rules: RuleView[];
  /** The most denied keys per rule in the current window (at most 5 per rule; empty with topKeys off). */
  topLimited: TopLimitedKey[];
  /** What the chaos lab posted, less the keys it asked to watch (they may hold API keys; `keys` has their labels). */
  annotations: Omit<Annotations, 'watch'> | null;
  syncIntervalMs: number | null;
}

export interface DashboardSource {
  snapshot(): Promise<DashboardSnapshot>;
}

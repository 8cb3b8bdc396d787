// The federation as every region must see it: regions sorted by name get indexes 0..n-1, weights are
// normalised and turned into integer share units (params.ts shareUnits), and a fingerprint lets regions
// refuse gossip from a differently configured federation.
// Lua mirror: none; the scripts take the share units as a list argument (lua/includes/federation.lua
// parse_units) and the region index as `self`.
import { createHash } from 'node:crypto';
import type { Config, Rule } from '../config/schema.ts';
import { gossipHorizonMs } from './admission-gossip.ts';
import { federationParams, shareUnits, type FederationParams } from './params.ts';

/** The federation as this region indexes it: what every script call and protocol parameter set is built from. */
export interface Topology {
  /** Region names sorted; a region's index is its position here. */
  regions: readonly string[];
  selfIndex: number;
  /** Normalised weights by region index (sum 1). */
  weights: readonly number[];
  /** Share units u_r by region index (Σ ≤ SHARE_UNITS): every X·ω is floor(X·u/S). */
  units: readonly number[];
  /** The share units as the Lua scripts take them. */
  unitsCsv: string;
  /** Peer indexes (every index but selfIndex), ascending. */
  peerIndexes: readonly number[];
  maxClockSkewMs: number;
  /** The gossip horizon H (ms) of the admission gossip test (gossipHorizonMs of the sync interval). */
  horizonMs: number;
  /** Identifies regions + weights; gossip from a federation with another fingerprint is rejected. */
  fingerprint: string;
}

/** This region's view of the federation from its config (its own region and weight, and its peers'). */
export function topologyOf(config: Pick<Config, 'region' | 'federation'>): Topology {
  const entries = [
    { name: config.region, weight: config.federation.weight },
    ...config.federation.peers.map((peer) => ({ name: peer.name, weight: peer.weight })),
  ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const total = entries.reduce((sum, entry) => sum + entry.weight, 0);
  const weights = entries.map((entry) => entry.weight / total);
  const regions = entries.map((entry) => entry.name);
  const selfIndex = regions.indexOf(config.region);
  const units = shareUnits(weights);
  const fingerprint = createHash('sha256')
    .update(JSON.stringify(entries.map((entry) => [entry.name, entry.weight])))
    .digest('base64url')
    .slice(0, 16);
  return {
    regions,
    selfIndex,
    weights,
    units,
    unitsCsv: units.join(','),
    peerIndexes: regions.map((_, index) => index).filter((index) => index !== selfIndex),
    maxClockSkewMs: config.federation.maxClockSkewMs,
    horizonMs: gossipHorizonMs(config.federation.syncIntervalMs),
    fingerprint,
  };
}

/** The protocol parameters of one rule as this region runs it (admin views and the dashboard read state with them). */
export function ruleFederationParams(
  config: Pick<Config, 'region' | 'federation'>,
  rule: Rule,
  topology: Topology = topologyOf(config),
): FederationParams {
  return federationParams({
    regions: topology.regions.length,
    self: topology.selfIndex,
    weights: topology.weights,
    limit: rule.limit,
    periodMs: rule.period,
    burst: rule.burst,
    leakageBudget: rule.leakageBudget ?? config.federation.leakageBudget,
    maxClockSkewMs: topology.maxClockSkewMs,
  });
}

// The local fallback of this instance, sized to its region: alone, its share of each limit; in a federation,
// its share of the region's demarcation part of limit + budget (protocol.ts portion), never another region's.
import { FEDERATED_ALGORITHMS, type Config } from '../config/schema.ts';
import { scriptBudget, topologyOf } from '../protocol/index.ts';
import { createLocalFallback, type LocalFallback } from './local-fallback.ts';

/**
 * The local fallback for this config's region; `capacity` bounds the keys it holds, `startedAtMs` is when this
 * process started (windows that began before it get no local allowance: local-fallback.ts).
 */
export function createRegionFallback(config: Config, capacity: number | undefined, startedAtMs: number): LocalFallback {
  const topology = topologyOf(config);
  const federated = topology.regions.length > 1;
  return createLocalFallback({
    instancesPerRegion: config.breaker.instancesPerRegion,
    capacity,
    startedAtMs: config.breaker.localFallbackStart === 'atOnce' ? undefined : startedAtMs,
    federation: federated
      ? {
          units: topology.units[topology.selfIndex] ?? 0,
          budget: (rule) => scriptBudget(rule, config.federation.leakageBudget, topology.regions.length),
          federated: (rule) => FEDERATED_ALGORITHMS.has(rule.algorithm),
        }
      : undefined,
  });
}

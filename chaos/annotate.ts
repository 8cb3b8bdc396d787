// Tells each region's dashboard what the run is doing (POST /dashboard/annotations), so a run can be watched
// live. Best effort: a region without a dashboard (404) or one that is down is skipped without complaint.
import { cutLinks } from './faults.ts';
import { REGIONS, type ChaosFault, type RegionName } from './types.ts';

export interface Annotator {
  scenario(name: string): void;
  partition(fault: ChaosFault | null, since?: number, until?: number): void;
  leakage(reading: { leakage: number; budget: number | null; limit: number; key?: string }): void;
}

export function createAnnotator(serviceUrl: (region: RegionName) => string, adminToken: string): Annotator {
  const unsupported = new Set<RegionName>();
  const post = (body: Record<string, unknown>) => {
    for (const region of REGIONS) {
      if (unsupported.has(region)) continue;
      fetch(`${serviceUrl(region)}/dashboard/annotations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken}` },
        body: JSON.stringify({ ttlMs: 60_000, ...body }),
        signal: AbortSignal.timeout(1_000),
      })
        .then((response) => {
          if (response.status === 404 || response.status === 405) unsupported.add(region);
          return response.body?.cancel();
        })
        .catch(() => undefined);
    }
  };
  return {
    scenario: (name) => post({ scenario: name, partition: null, leakage: null }),
    partition(fault, since, until) {
      if (!fault) return post({ partition: null });
      const links = cutLinks(fault).map((link) => ({ ...link, oneWay: fault.kind === 'oneWay' }));
      const region =
        fault.kind === 'partition' ||
        fault.kind === 'redisDown' ||
        fault.kind === 'serviceDown' ||
        fault.kind === 'redisSnapshotRestart' ||
        fault.kind === 'regionRemoved'
          ? fault.region
          : undefined;
      if (!region && links.length === 0) return;
      post({
        partition: {
          ...(region ? { region } : {}),
          ...(links.length ? { links } : {}),
          ...(since ? { since } : {}),
          ...(until ? { until } : {}),
        },
      });
    },
    leakage: (reading) => post({ leakage: reading }),
  };
}

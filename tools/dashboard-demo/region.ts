// One region of the dashboard demo, as its own process (so each region has its own metrics registry, as in
// production): the region service, its federation, and the dashboard on a second listener. Started by tools/dashboard-demo/demo.ts; prints
// one JSON line `{"ready":…}` when it serves.
//
//   node --import tsx tools/dashboard-demo/region.ts '<json: { config, watch, dashboardPort }>'
import { serve } from '@hono/node-server';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Hono } from 'hono';
import { Config, type ConfigInput } from '../../src/config/schema.ts';
import type { Federation } from '../../src/federation/index.ts';
import { createLogger } from '../../src/log.ts';
import { registry } from '../../src/metrics.ts';
import { startRegionService } from '../../src/service.ts';
import { createAnnotationStore } from '../../src/dashboard/annotations.ts';
import type { WatchedKey } from '../../src/dashboard/key-view.ts';
import { registerDashboard } from '../../src/dashboard/routes.ts';
import { createDashboardSource } from '../../src/dashboard/source.ts';

export interface DemoRegionSpec {
  config: ConfigInput;
  watch: WatchedKey[];
  dashboardPort: number;
  /** Start the federation's gossip (default true); without it each region only sees itself. */
  federate?: boolean;
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as DemoRegionSpec;
  const config = Config.parse(spec.config);
  const logger = createLogger({ level: config.logLevel, base: { region: config.region } });
  // The demo's redis-servers are new on every run: a brand-new federation (recovery would fence a start where every
  // peer is new as well). The service runs the one federation, or none when the spec says so.
  const service = await startRegionService(config, { logger, federation: spec.federate !== false, newFederation: true });
  const federation: Federation | undefined = service.federation;
  const annotations = createAnnotationStore();
  const source = createDashboardSource({
    config,
    registry,
    annotations,
    redis: service.redis,
    federation,
    breakerState: () => service.engine.breaker.state,
    watch: spec.watch,
  });
  const app = new Hono();
  // The demo's dashboard listener is private to the test machine, so the annotation routes sit beside the page.
  registerDashboard(app, source, { annotations });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: spec.dashboardPort, hostname: '127.0.0.1' }, () => resolve(s as Server)) as Server;
  });
  const { port } = server.address() as AddressInfo;
  const dashboardUrl = `http://127.0.0.1:${port}/dashboard`;
  const ready = { ready: true, region: config.region, url: service.url, dashboardUrl, federated: federation !== undefined };
  process.stdout.write(`${JSON.stringify(ready)}\n`);

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    server.closeAllConnections();
    server.close();
    await source.close();
    await service.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

main().catch((error: unknown) => {
  process.stderr.write(`demo region failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});

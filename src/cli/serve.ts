// `quotafed serve` and `quotafed check-config`.
import { loadConfigFile, type Config } from '../config/load.ts';
import { createLogger } from '../log.ts';
import { serveClustered } from '../ops/cluster-mode.ts';
import { startRegionService } from '../service.ts';

export async function checkConfigCommand(configPath: string | undefined): Promise<number> {
  const config = loadConfigFile(configPath);
  process.stdout.write(
    `config OK: region ${config.region}, ${config.rules.length} rule(s): ${config.rules.map((r) => r.name).join(', ')}\n`,
  );
  return 0;
}

/** Starts the region and resolves when it has stopped after SIGTERM/SIGINT. */
export async function serveCommand(
  configPath: string | undefined,
  options: { watchConfig?: boolean; workers?: number; newFederation?: boolean } = {},
): Promise<number> {
  const config: Config = loadConfigFile(configPath);
  const path = configPath ?? process.env.QUOTAFED_CONFIG;
  const serviceOptions = {
    ...(path ? { configPath: path } : {}),
    watchConfig: options.watchConfig ?? false,
    newFederation: options.newFederation ?? false,
  };
  if (options.workers !== undefined && options.workers > 1) {
    // node:cluster: every worker runs the whole region service on the shared port (the publisher lock keeps
    // one gossip publisher); the primary supervises and coordinates shutdown.
    return serveClustered({
      workers: options.workers,
      logger: createLogger({ level: config.logLevel, base: { region: config.region } }),
      start: () => startRegionService(config, serviceOptions),
    });
  }
  const service = await startRegionService(config, serviceOptions);
  // SIGHUP reloads the policy, as operators expect of a daemon.
  process.on('SIGHUP', () => {
    void service.reloadPolicy().then((result) => {
      if (!result.ok) service.logger.warn({ event: 'policy.sighup_rejected', error: result.error }, 'SIGHUP reload rejected');
    });
  });
  return new Promise((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        service.logger.warn({ event: 'service.forced_exit', signal }, 'second signal: exiting now');
        process.exit(1);
      }
      stopping = true;
      service.logger.info({ event: 'service.signal', signal }, 'shutting down');
      service.close().then(
        () => resolve(0),
        (error: unknown) => {
          service.logger.error({ event: 'service.shutdown_failed', error: (error as Error).message }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

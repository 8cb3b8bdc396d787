// Standalone server: `npx tsx chaos/toxiproxy/main.ts --host 127.0.0.1 --port 8474 [--config proxies.json]`.
// Flags follow the Go binary (-host, -port, -config); LOG_LEVEL sets the log level.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { LevelWithSilent } from 'pino';
import { createLogger } from '../../src/log.ts';
import { startToxiproxyServer } from './server.ts';

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '8474' },
    config: { type: 'string' },
  },
});

const logger = createLogger({ level: (process.env.LOG_LEVEL?.toLowerCase() ?? 'info') as LevelWithSilent });
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  logger.fatal({ port: values.port }, 'invalid --port');
  process.exit(2);
}

const server = await startToxiproxyServer({ host: values.host, port, logger });

if (values.config) {
  // Like Go's -config: a populate-format JSON array loaded at start.
  const response = await fetch(`${server.url}/populate`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: await readFile(values.config, 'utf8'),
  });
  if (!response.ok) logger.error({ config: values.config, body: await response.text() }, 'populating from config failed');
  else logger.info({ config: values.config }, 'populated proxies from config');
}

logger.info({ url: server.url }, 'toxiproxy server ready');

let stopping = false;
const stop = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down');
  server.close().then(
    () => process.exit(0),
    (error: unknown) => {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    },
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

// One `quotafed serve` process on a config written for it: the tests that need a real service process with a config
// of their own (not one of regions/*.yaml) write it as YAML into their temporary folder and start it here.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort } from '../../src/ops/redis-process.ts';
import { startServiceProcess, type ServiceProcess } from '../../src/ops/service-process.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

/**
 * Writes `config` with a free `port` as `<dir>/<file>.yaml` and starts `quotafed serve` on it (its output dropped);
 * resolves once it answers.
 *
 * @example
 * const service = await serveConfig(dir, 'us-east', { region: 'us-east', redis: { url }, rules });
 * await fetch(`${service.url}/v1/check`, { method: 'POST', body: '{"apiKey":"k"}' });
 */
export async function serveConfig(
  dir: string,
  file: string,
  config: Record<string, unknown> & { region: string },
): Promise<ServiceProcess> {
  const port = await freePort();
  const configPath = join(dir, `${file}.yaml`);
  writeFileSync(configPath, stringify({ ...config, port }));
  return startServiceProcess({ region: config.region, configPath, port, root: ROOT, write: () => undefined, readyTimeoutMs: 30_000 });
}

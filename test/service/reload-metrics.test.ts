// The config reload metrics of a real service on a real redis-server: reloads counted by result, and the time of
// the last successful load (start-up, then each successful reload) as a Unix timestamp in seconds.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { startRegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { metricValue } from './fixtures.ts';

const server = await useRedis();
const dir = mkdtempSync(join(tmpdir(), 'quotafed-reload-metrics-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const write = (path: string, limit: number) =>
  writeFileSync(
    path,
    stringify({
      region: 'reload-metrics',
      port: 0,
      redis: { url: server.url },
      logLevel: 'silent',
      rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit, period: '1h' }],
    }),
  );

describe('config reload metrics', () => {
  it('counts reloads by result and stamps the last successful one', async () => {
    const path = join(dir, 'region.yaml');
    write(path, 2);
    const started = Date.now() / 1000;
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path, dashboard: false });
    const page = async () => (await fetch(`${service.url}/metrics`)).text();
    try {
      const before = await page();
      const successes = await metricValue(before, 'quotafed_config_reloads_total', { result: 'success' });
      const failures = await metricValue(before, 'quotafed_config_reloads_total', { result: 'failure' });
      const loaded = await metricValue(before, 'quotafed_config_last_reload_success_timestamp_seconds');
      expect(loaded).toBeGreaterThanOrEqual(Math.floor(started));

      write(path, -1);
      expect((await service.reloadPolicy()).ok).toBe(false);
      const rejected = await page();
      expect(await metricValue(rejected, 'quotafed_config_reloads_total', { result: 'failure' })).toBe(failures + 1);
      expect(await metricValue(rejected, 'quotafed_config_last_reload_success_timestamp_seconds')).toBe(loaded);

      await new Promise((resolve) => setTimeout(resolve, 20));
      write(path, 5);
      expect((await service.reloadPolicy()).ok).toBe(true);
      const reloaded = await page();
      expect(await metricValue(reloaded, 'quotafed_config_reloads_total', { result: 'success' })).toBe(successes + 1);
      expect(await metricValue(reloaded, 'quotafed_config_last_reload_success_timestamp_seconds')).toBeGreaterThan(loaded);
      expect(reloaded).toMatch(/^quotafed_build_info\{version="\d+\.\d+\.\d+[^"]*",node_version="v[\d.]+",region="reload-metrics"\} 1$/m);
    } finally {
      await service.close();
    }
  });
});

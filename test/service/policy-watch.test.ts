// `serve --watch-config` against a real service and redis-server: the new policy takes effect after every
// atomic replace (a temp file renamed over the config) and after a Kubernetes-style ConfigMap swap (the
// `..data` symlink moved to a new directory), not just the first time.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';

const server = await useRedis();
const dir = mkdtempSync(join(tmpdir(), 'quotafed-watch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const configText = (limit: number) =>
  stringify({
    region: 'us-east',
    port: 0,
    redis: { url: server.url, commandTimeoutMs: 2000 },
    logLevel: 'silent',
    rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit, period: '1h' }],
  });

async function allowed(url: string, apiKey: string): Promise<boolean> {
  const response = await fetch(`${url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey, method: 'GET', path: '/x' }) });
  return ((await response.json()) as { allowed: boolean }).allowed;
}

async function limitBecomes(service: RegionService, limit: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && service.engine.config.rules[0]!.limit !== limit) await new Promise((r) => setTimeout(r, 50));
  expect(service.engine.config.rules[0]!.limit).toBe(limit);
}

/** `limit` admissions for a fresh key, then a denial: the limit the service enforces. */
async function enforces(service: RegionService, key: string, limit: number): Promise<void> {
  const answers: boolean[] = [];
  for (let i = 0; i <= limit; i++) answers.push(await allowed(service.url, key));
  expect(answers).toEqual([...Array<boolean>(limit).fill(true), false]);
}

describe('--watch-config', () => {
  it('takes every atomic replace (temp file + rename), twice in a row', async () => {
    const path = join(dir, 'atomic.yaml');
    writeFileSync(path, configText(1));
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path, watchConfig: true });
    try {
      await enforces(service, 'a0', 1);
      for (const [round, limit] of [2, 3].entries()) {
        const temp = join(dir, `.atomic.yaml.${round}.tmp`);
        writeFileSync(temp, configText(limit));
        renameSync(temp, path);
        await limitBecomes(service, limit);
        await enforces(service, `a${limit}`, limit);
      }
    } finally {
      await service.close();
    }
  });

  it('takes a ConfigMap update (the ..data symlink swapped), twice in a row', async () => {
    // The layout the kubelet writes: config.yaml -> ..data/config.yaml, ..data -> ..<timestamp>/.
    const mount = join(dir, 'configmap');
    mkdirSync(join(mount, '..v1'), { recursive: true });
    writeFileSync(join(mount, '..v1', 'config.yaml'), configText(1));
    symlinkSync('..v1', join(mount, '..data'));
    symlinkSync(join('..data', 'config.yaml'), join(mount, 'config.yaml'));
    const path = join(mount, 'config.yaml');
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path, watchConfig: true });
    try {
      await enforces(service, 'c0', 1);
      for (const limit of [2, 3]) {
        mkdirSync(join(mount, `..v${limit}`));
        writeFileSync(join(mount, `..v${limit}`, 'config.yaml'), configText(limit));
        symlinkSync(`..v${limit}`, join(mount, '..data_tmp'));
        renameSync(join(mount, '..data_tmp'), join(mount, '..data'));
        await limitBecomes(service, limit);
        await enforces(service, `c${limit}`, limit);
      }
    } finally {
      await service.close();
    }
  });
});

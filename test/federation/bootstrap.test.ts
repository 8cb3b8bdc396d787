// A region's very first start while its peers are not reachable (a fresh federation and one region on its
// own), with the real CLI (`quotafed serve` child processes) and real redis-server processes:
// - by default it cannot rule out a data loss, so it fences the current windows, and says why in one warn line;
// - `serve --new-federation` (or `federation.bootstrap: new`, here through QUOTAFED_FEDERATION_BOOTSTRAP) starts
//   without a fence, but only on a Redis that holds no quotafed state and only while no peer has heard of it;
// - regions/standalone.yaml has no federation at all and admits at once.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.ts';
import { KEY_SHARDS, META_KEY, shardMarkerKey } from '../../src/keys.ts';
import { restartOnlyChanges } from '../../src/policy.ts';
import { recoverOnStart } from '../../src/federation/recovery.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { silentLogger } from '../../src/log.ts';
import { freePort } from '../../src/ops/redis-process.ts';
import { startServiceProcess, type ServiceProcess } from '../../src/ops/service-process.ts';
import { client, useRedis, type RedisProcess } from '../harness/redis.ts';

const root = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const scratch = mkdtempSync(join(tmpdir(), 'quotafed-bootstrap-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const own: RedisProcess = await useRedis();
const peerRedis: RedisProcess = await useRedis();
const ownClient = client(own.url);

interface Started {
  service: ServiceProcess;
  lines: string[];
  url: string;
}

const running: ServiceProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((service) => service.stop(3_000)));
});

/** regions/<file> rewritten onto this test's Redis and a free port; peers as given (unreachable by default). */
async function configFrom(file: string, peers?: Array<{ name: string; redisUrl: string }>): Promise<{ path: string; port: number }> {
  const raw = parse(readFileSync(join(root, 'regions', file), 'utf8')) as Record<string, any>;
  const port = await freePort();
  raw.port = port;
  raw.redis = { ...raw.redis, url: own.url };
  delete raw.upstream;
  raw.logLevel = 'info';
  if (raw.federation) {
    // Nothing listens on these ports: the peers "cannot be asked", as on a first deployment before they are up.
    raw.federation.peers =
      peers ??
      (await Promise.all(
        raw.federation.peers.map(async (peer: { name: string }) => ({
          name: peer.name,
          redisUrl: `redis://127.0.0.1:${await freePort()}`,
        })),
      ));
  }
  const path = join(scratch, `${file.replace('.yaml', '')}-${port}.yaml`);
  writeFileSync(path, stringify(raw));
  return { path, port };
}

async function serve(configPath: string, port: number, options: { args?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<Started> {
  const lines: string[] = [];
  const service = await startServiceProcess({
    region: 'under-test',
    configPath,
    port,
    root,
    write: (line) => lines.push(line),
    args: options.args,
    env: { ...process.env, ...options.env },
    readyTimeoutMs: 60_000,
  });
  running.push(service);
  return { service, lines, url: service.url };
}

async function stop(started: Started): Promise<void> {
  await started.service.stop(5_000);
  running.splice(running.indexOf(started.service), 1);
}

async function check(
  url: string,
  apiKey: string,
  path = '/hello',
): Promise<{ allowed: boolean; source: string | undefined; limit: number }> {
  const response = await fetch(`${url}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiKey, method: 'GET', path, ip: '10.0.0.1' }),
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { allowed: boolean; limit: number; outcomes: Array<{ source?: string }> };
  return { allowed: body.allowed, source: body.outcomes[0]?.source, limit: body.limit };
}

async function admitted(url: string, apiKey: string, count: number, path?: string): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < count; i++) if ((await check(url, apiKey, path)).allowed) allowed++;
  return allowed;
}

async function fences(): Promise<number[]> {
  return Promise.all(Array.from({ length: KEY_SHARDS }, async (_, shard) => Number(await ownClient.hget(shardMarkerKey(shard), 'fence'))));
}

const lineWith = (started: Started, text: string) => started.lines.find((line) => line.includes(text));

describe('first start of a region whose peers cannot be asked', { timeout: 90_000 }, () => {
  it('by default fences the current windows, answers 429, and says why in one warn line', async () => {
    await ownClient.flushall();
    const { path, port } = await configFrom('us-east.yaml');
    const started = await serve(path, port);
    try {
      expect(await admitted(started.url, 'k-default', 5)).toBe(0);
      expect(await admitted(started.url, 'k-default', 3, '/checkout')).toBe(0);
      const line = lineWith(started, 'federation.fenced');
      expect(line, started.lines.join('\n')).toBeDefined();
      expect(line).toMatch(/^\[under-test\] WARN fencing all 64 shards at \S+Z: .*could not be asked/);
      // The reason names the way out, and the line says until when each federated rule admits nothing.
      expect(line).toContain('--new-federation');
      expect(line).toMatch(/"per-key":"\d{4}-\d\d-\d\dT[^"]+Z"/);
      expect(line).toMatch(/"checkout":"\d{4}-/);
      expect((await fences()).every((fence) => fence > 0)).toBe(true);
    } finally {
      await stop(started);
    }
  });

  it('serve --new-federation on an empty Redis starts without a fence and admits at once', async () => {
    await ownClient.flushall();
    const { path, port } = await configFrom('us-east.yaml');
    const started = await serve(path, port, { args: ['--new-federation'] });
    try {
      // Its share of the per-key bucket (1,050 / 3) and of /checkout's window are there from the first request.
      expect(await admitted(started.url, 'k-new', 20)).toBe(20);
      expect(await admitted(started.url, 'k-new', 3, '/checkout')).toBe(3);
      expect(lineWith(started, 'federation.fenced')).toBeUndefined();
      expect(lineWith(started, 'new federation declared')).toMatch(/^\[under-test\] WARN starting fresh without a fence/);
      expect((await fences()).every((fence) => fence === 0)).toBe(true);
      expect(await ownClient.hexists(META_KEY, 'started')).toBe(1);
    } finally {
      await stop(started);
    }
    // A restart of the same region (its Redis intact) needs no declaration and does not fence either.
    const again = await serve(path, port);
    try {
      expect(await admitted(again.url, 'k-new-2', 5)).toBe(5);
      expect(lineWith(again, 'federation.fenced')).toBeUndefined();
    } finally {
      await stop(again);
    }
  });

  it('federation.bootstrap: new (QUOTAFED_FEDERATION_BOOTSTRAP) is the same declaration', async () => {
    await ownClient.flushall();
    const { path, port } = await configFrom('us-east.yaml');
    const started = await serve(path, port, { env: { QUOTAFED_FEDERATION_BOOTSTRAP: 'new' } });
    try {
      expect(await admitted(started.url, 'k-env', 10)).toBe(10);
      expect(lineWith(started, 'federation.fenced')).toBeUndefined();
    } finally {
      await stop(started);
    }
  });

  it('the declaration is refused when this Redis already holds quotafed state without a start-up marker', async () => {
    await ownClient.flushall();
    const { path, port } = await configFrom('us-east.yaml');
    const first = await serve(path, port, { args: ['--new-federation'] });
    expect(await admitted(first.url, 'k-partial', 10)).toBe(10);
    await stop(first);
    // A partial loss: the start-up marker is gone, the rule state is still there.
    await ownClient.hdel(META_KEY, 'started');
    const started = await serve(path, port, { args: ['--new-federation'] });
    try {
      // A key whose state is not in this Redis (it may have been lost) gets nothing in the fenced window.
      expect(await admitted(started.url, 'k-partial-other', 5), started.lines.join('\n')).toBe(0);
      expect(await admitted(started.url, 'k-partial-other', 2, '/checkout')).toBe(0);
      expect(lineWith(started, 'federation.fenced')).toMatch(
        /a new federation was declared, but this Redis already holds quotafed state \(qf:/,
      );
    } finally {
      await stop(started);
    }
  });

  it('the declaration is overruled when a peer has heard of this region before', async () => {
    await ownClient.flushall();
    const peerClient = client(peerRedis.url);
    await peerClient.flushall();
    await peerClient.hset(META_KEY, 'heard:us-east', Date.now());
    const { path, port } = await configFrom('us-east.yaml', [
      { name: 'eu-west', redisUrl: peerRedis.url },
      { name: 'ap-south', redisUrl: `redis://127.0.0.1:${await freePort()}` },
    ]);
    const started = await serve(path, port, { args: ['--new-federation'] });
    try {
      expect(await admitted(started.url, 'k-heard', 5)).toBe(0);
      const line = lineWith(started, 'federation.fenced');
      expect(line).toContain('eu-west heard of us-east before');
      expect(line).toContain('the new-federation declaration is overruled');
    } finally {
      await stop(started);
    }
  });
});

describe('several processes of one region starting at once (serve --workers, instances sharing a Redis)', () => {
  it('one runs the start-up check, the others take its outcome: a declared new federation is not fenced by a sibling', async () => {
    await ownClient.flushall();
    const { path } = await configFrom('us-east.yaml');
    const config = loadConfigFile(path, {});
    const deps = { config, topology: topologyOf(config), redis: ownClient, logger: silentLogger(), timeoutMs: 500, declaredNew: true };
    const results = await Promise.all(Array.from({ length: 4 }, () => recoverOnStart(deps)));
    expect(results.map((result) => result.fenced)).toEqual([false, false, false, false]);
    expect(results.filter((result) => result.declaredNew).length).toBe(1);
    expect((await fences()).every((fence) => fence === 0)).toBe(true);
    expect(await ownClient.exists('qf:meta:recovery')).toBe(0);
  });
});

describe('regions/standalone.yaml: one region on its own', { timeout: 60_000 }, () => {
  it('has no federation, never fences, and enforces the seed policy exactly', async () => {
    await ownClient.flushall();
    const { path, port } = await configFrom('standalone.yaml');
    const started = await serve(path, port);
    try {
      const first = await check(started.url, 'k-alone');
      expect(first).toMatchObject({ allowed: true, source: 'redis' });
      // /checkout: 10 per minute for this key, exactly (a single region holds the whole limit).
      expect(await admitted(started.url, 'k-alone', 12, '/checkout')).toBe(10);
      expect(lineWith(started, 'federation.fenced')).toBeUndefined();
      expect(await ownClient.exists(META_KEY)).toBe(0);
    } finally {
      await stop(started);
    }
  });
});

describe('federation.bootstrap is read once, at start-up', () => {
  it('dropping the declaration after the first deployment does not block a policy reload', () => {
    const declared = loadConfigFile(join(root, 'regions/us-east.yaml'), { QUOTAFED_FEDERATION_BOOTSTRAP: 'new' });
    const dropped = loadConfigFile(join(root, 'regions/us-east.yaml'), {});
    expect(declared.federation.bootstrap).toBe('new');
    expect(dropped.federation.bootstrap).toBe('auto');
    expect(restartOnlyChanges(declared, dropped)).toEqual([]);
    expect(() => loadConfigFile(join(root, 'regions/us-east.yaml'), { QUOTAFED_FEDERATION_BOOTSTRAP: 'fresh' })).toThrow(
      /federation\.bootstrap/,
    );
  });
});

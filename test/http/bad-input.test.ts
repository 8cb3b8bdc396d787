// Bad input gets a 4xx with reasons, never a 500, and never reaches the upstream; invalid configs stop the
// CLI with exit code 2 and name the field.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { awayFromWindowEdge, seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';

const BIN = new URL('../../bin/quotafed.js', import.meta.url).pathname;

function cli(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, ...env } });
}

describe('CLI config validation', () => {
  const dir = mkdtempSync(join(tmpdir(), 'quotafed-cli-'));
  const write = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('check-config accepts the shipped region files', () => {
    const result = cli(['check-config', '--config', 'regions/us-east.yaml']);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('config OK: region us-east');
  });

  it('exits 2 and names every bad field', () => {
    const path = write('bad.yaml', 'region: us-east\nrules:\n  - name: per-key\n    limit: -1\n    algorithm: leakyBucket\n');
    for (const command of ['check-config', 'serve']) {
      const result = cli([command, '--config', path]);
      expect(result.status).toBe(2);
      expect(result.stderr).toContain('rules[0].limit');
      expect(result.stderr).toContain('rules[0].algorithm');
    }
  });

  it('exits 2 on an unknown field, a bad environment override and a missing file', () => {
    const unknown = cli([
      'check-config',
      '--config',
      write('extra.yaml', 'region: us-east\nrules: [{ name: a, limit: 1 }]\nredis: { urll: "redis://x" }\n'),
    ]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/redis.*urll|urll/);

    const env = cli(['check-config', '--config', 'regions/us-east.yaml'], { QUOTAFED_PORT: 'eighty' });
    expect(env.status).toBe(2);
    expect(env.stderr).toContain('QUOTAFED_PORT');

    const missing = cli(['check-config', '--config', join(dir, 'nope.yaml')]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('cannot read config');
  });
});

describe('hostile requests', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let service: RegionService;

  beforeAll(async () => {
    upstream = await startUpstream();
    service = await startRegionService(seedConfig(redis.url, (raw) => void (raw.upstream = { url: upstream.url })));
  });
  afterAll(async () => {
    await service?.close();
    await upstream?.close();
  });

  const check = (body: string) =>
    fetch(`${service.url}/v1/check`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });

  it.each([
    ['not JSON', '{"method":', /not valid JSON/],
    ['missing path', '{"method":"GET"}', /path/],
    ['path without slash', '{"method":"GET","path":"search"}', /path/],
    ['negative cost', '{"method":"GET","path":"/x","cost":-3}', /cost/],
    ['fractional cost', '{"method":"GET","path":"/x","cost":1.5}', /cost/],
    ['unknown field', '{"method":"GET","path":"/x","tenant":"t"}', /tenant|unrecognized/i],
    ['bad ip', '{"method":"GET","path":"/x","ip":"999.1.1.1"}', /ip/],
    ['method with spaces', '{"method":"GE T","path":"/x"}', /method/],
    ['array body', '[1,2]', /expected object/i],
    ['oversized API key', JSON.stringify({ method: 'GET', path: '/x', apiKey: 'k'.repeat(600) }), /apiKey/],
  ])('/v1/check rejects %s with 400 and reasons', async (_name, body, reason) => {
    const res = await check(body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: string; reasons: string[] };
    expect(json.error).toBe('Invalid request body');
    expect(json.reasons.join('\n')).toMatch(reason);
  });

  it('/v1/check rejects a body over 16 KB with 413', async () => {
    const res = await check(JSON.stringify({ method: 'GET', path: `/${'a'.repeat(20_000)}` }));
    expect(res.status).toBe(413);
  });

  it('answers oversized headers with 431 and the process keeps serving', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${service.url}/search`, { headers: { 'X-Junk': 'x'.repeat(64 * 1024) } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(431);
    expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
  });

  it('rejects an API key over identity.maxApiKeyBytes with 400 and a reason, before the upstream', async () => {
    const before = upstream.seen.length;
    for (const headers of [{ Authorization: `Bearer ${'k'.repeat(600)}` }, { 'X-API-Key': 'é'.repeat(300) }] as Record<string, string>[]) {
      const res = await fetch(`${service.url}/search`, { headers });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(/longer than 512 bytes/);
    }
    expect(upstream.seen.length).toBe(before);
  });

  it('decides odd but valid keys and paths without a 5xx', async () => {
    const keys = ['{s1}', 'a:b:c', '🔑', ' padded ', 'k'.repeat(512)];
    for (const key of keys) {
      const res = await fetch(`${service.url}/v1/check`, {
        method: 'POST',
        body: JSON.stringify({ apiKey: key, method: 'get', path: '/search?q=1#x' }),
      });
      expect(res.status).toBe(200);
    }
    for (const path of ['/%7B%7D', '/a/../../b', '/%00', `/${'x/'.repeat(500)}`]) {
      const res = await fetch(`${service.url}${path}`, { headers: { 'X-API-Key': 'odd-paths' } });
      expect(res.status).toBeLessThan(500);
    }
  });

  it('forwards allowed requests with their method, path, query and body, and never the denied ones', async () => {
    await awayFromWindowEdge();
    const start = upstream.seen.length;
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await fetch(`${service.url}/checkout?i=${i}`, {
        method: 'POST',
        headers: { 'X-API-Key': 'gateway-key' },
        body: `order ${i}`,
      });
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    const forwarded = upstream.seen.slice(start);
    expect(forwarded).toHaveLength(10);
    expect(forwarded.every((r) => r.method === 'POST' && r.path.startsWith('/checkout?i='))).toBe(true);
    expect(forwarded[0]!.headers['x-api-key']).toBe('gateway-key');
    expect(forwarded[0]!.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  it('never forwards the service paths or admin paths', async () => {
    const start = upstream.seen.length;
    for (const path of ['/admin', '/admin/reload', '/v1/check', '/healthz']) {
      const res = await fetch(`${service.url}${path}`, { method: 'PUT', headers: { 'X-API-Key': 'k' } });
      expect([401, 403, 404, 405]).toContain(res.status);
    }
    expect(upstream.seen.length).toBe(start);
  });

  it('answers 502 when the upstream is down, not 500', async () => {
    const down = await startUpstream();
    await down.close();
    const lonely = await startRegionService(seedConfig(redis.url, (raw) => void (raw.upstream = { url: down.url })));
    try {
      const res = await fetch(`${lonely.url}/x`, { headers: { 'X-API-Key': 'k502' } });
      expect(res.status).toBe(502);
    } finally {
      await lonely.close();
    }
  });
});

// Policy reload without a restart, and shadow mode for safe rollouts, against a real service and redis-server.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { registry } from '../../src/metrics.ts';
import { RELOADABLE, restartOnlyChanges } from '../../src/policy.ts';
import { startRegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { dashboardSnapshot } from '../support/dashboard.ts';

const server = await useRedis();
const dir = mkdtempSync(join(tmpdir(), 'quotafed-reload-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const TOKEN = 'reload-test-admin-token';

function writeConfig(path: string, rules: unknown[], extra: Record<string, unknown> = {}): void {
  writeFileSync(
    path,
    stringify({
      region: 'us-east',
      port: 0,
      redis: { url: server.url, commandTimeoutMs: 2000 },
      admin: { token: TOKEN },
      logLevel: 'silent',
      rules,
      ...extra,
    }),
  );
}

const fixed = (limit: number, extra: Record<string, unknown> = {}) => ({
  name: 'per-key',
  by: ['apiKey'],
  algorithm: 'fixedWindow',
  limit,
  period: '1h',
  ...extra,
});

async function check(url: string, apiKey: string): Promise<number> {
  const response = await fetch(`${url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey, method: 'GET', path: '/x' }) });
  const body = (await response.json()) as { allowed: boolean };
  return body.allowed ? 200 : 429;
}

async function reload(url: string): Promise<{ status: number; body: { ok: boolean; error?: string; fields?: string[] } }> {
  const response = await fetch(`${url}/admin/policy/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: response.status, body: (await response.json()) as never };
}

describe('policy reload', () => {
  it('swaps valid rules atomically, keeps the old policy on an invalid file or a restart-only change', async () => {
    const path = join(dir, 'reload.yaml');
    writeConfig(path, [fixed(2)]);
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path });
    try {
      expect([await check(service.url, 'a'), await check(service.url, 'a'), await check(service.url, 'a')]).toEqual([200, 200, 429]);

      writeConfig(path, [fixed(5)]);
      const ok = await reload(service.url);
      expect(ok.status).toBe(200);
      expect(ok.body.ok).toBe(true);
      // Same window, same counter: 2 used, 3 more fit under the new limit.
      expect([
        await check(service.url, 'a'),
        await check(service.url, 'a'),
        await check(service.url, 'a'),
        await check(service.url, 'a'),
      ]).toEqual([200, 200, 200, 429]);

      writeConfig(path, [fixed(-1)]);
      const invalid = await reload(service.url);
      expect(invalid.status).toBe(400);
      expect(invalid.body.fields).toContain('rules[0].limit');
      expect(await check(service.url, 'b')).toBe(200);

      writeConfig(path, [fixed(100)], { port: 1 });
      const restartOnly = await reload(service.url);
      expect(restartOnly.status).toBe(400);
      expect(restartOnly.body.fields).toEqual(['port']);
      // Still the limit of 5 for key b: 1 used, 4 more.
      const results = [];
      for (let i = 0; i < 5; i++) results.push(await check(service.url, 'b'));
      expect(results).toEqual([200, 200, 200, 200, 429]);

      const unauthorized = await fetch(`${service.url}/admin/policy/reload`, { method: 'POST' });
      expect(unauthorized.status).toBe(401);
    } finally {
      await service.close();
    }
  });

  it('refuses to redefine a rule under its name (another algorithm or period) and keeps the counts in force', async () => {
    const path = join(dir, 'redefine.yaml');
    writeConfig(path, [fixed(2)]);
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path });
    try {
      expect(await check(service.url, 'r')).toBe(200);
      expect(await check(service.url, 'r')).toBe(200);
      expect(await check(service.url, 'r')).toBe(429);
      // A fixed window of 2 per hour read as a token bucket, or under a 1-minute window id, would admit again.
      writeConfig(path, [fixed(2, { algorithm: 'tokenBucket', period: '1m' })]);
      const refused = await reload(service.url);
      expect(refused.body.ok).toBe(false);
      expect(refused.body.fields).toEqual(['rules[0].algorithm', 'rules[0].period']);
      expect(refused.body.error).toMatch(/rule "per-key": a reload may not change its algorithm \(fixedWindow -> tokenBucket\)/);
      expect(await check(service.url, 'r')).toBe(429);
      // Under a new name it is a new rule: accepted.
      writeConfig(path, [fixed(2), fixed(5, { name: 'per-key-v2', algorithm: 'tokenBucket', period: '1m' })]);
      expect((await reload(service.url)).body.ok).toBe(true);
      expect(await check(service.url, 'r')).toBe(429);
    } finally {
      await service.close();
    }
  });

  it('reloads when the watched file changes', async () => {
    const path = join(dir, 'watched.yaml');
    writeConfig(path, [fixed(1)]);
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path, watchConfig: true });
    try {
      expect([await check(service.url, 'w'), await check(service.url, 'w')]).toEqual([200, 429]);
      writeConfig(path, [fixed(3)]);
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && service.engine.config.rules[0]!.limit !== 3) await new Promise((r) => setTimeout(r, 50));
      expect(service.engine.config.rules[0]!.limit).toBe(3);
      expect(await check(service.url, 'w')).toBe(200);
    } finally {
      await service.close();
    }
  });
});

describe('the policy in force', () => {
  it('the restart-only list is everything outside RELOADABLE', () => {
    expect(RELOADABLE).toEqual(['rules', 'envoy', 'federation.leakageBudget', 'lists.allow', 'lists.deny', 'plans']);
    const path = join(dir, 'derive.yaml');
    writeConfig(path, [fixed(2)]);
    const base = loadConfigFile(path, {});
    const reloadable = { ...base, rules: [], federation: { ...base.federation, leakageBudget: 42 } };
    expect(restartOnlyChanges(base, reloadable as never)).toEqual([]);
    expect(restartOnlyChanges(base, { ...base, port: 1, logLevel: 'debug' })).toEqual(['port', 'logLevel']);
    expect(restartOnlyChanges(base, { ...base, federation: { ...base.federation, syncIntervalMs: 999 } })).toEqual([
      'federation.syncIntervalMs',
    ]);
    const lists = { ...base.lists, allow: [{ apiKey: 'k' }], deny: [{ ip: '10.0.0.0/8' }] };
    expect(restartOnlyChanges(base, { ...base, lists })).toEqual([]);
    expect(restartOnlyChanges(base, { ...base, lists: { ...base.lists, refreshMs: 5_000 } })).toEqual(['lists.refreshMs']);
  });

  it('after a reload the dashboard shows the new rules and reads watched keys under them', async () => {
    const path = join(dir, 'dashboard.yaml');
    writeConfig(path, [fixed(2)]);
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path });
    try {
      const watch = await fetch(`${service.url}/dashboard/annotations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ watch: [{ rule: 'checkout', apiKey: 'd', path: '/x', label: 'd-checkout' }] }),
      });
      expect(watch.status).toBe(200);
      const before = await dashboardSnapshot(service.url);
      expect(before.rules.map((rule) => [rule.name, rule.limit])).toEqual([['per-key', 2]]);
      // The watched key's rule does not exist yet: the page shows no view for it.
      expect(before.keys).toEqual([]);

      writeConfig(path, [fixed(7), { name: 'checkout', by: ['apiKey', 'endpoint'], algorithm: 'fixedWindow', limit: 3, period: '1h' }]);
      expect((await reload(service.url)).body.ok).toBe(true);
      expect(await check(service.url, 'd')).toBe(200);
      expect(service.policy.config.rules.map((rule) => rule.name)).toEqual(['per-key', 'checkout']);

      // The snapshot cache holds one for up to 500 ms: a fresh one shows the reloaded policy.
      await new Promise((r) => setTimeout(r, 600));
      const after = await dashboardSnapshot(service.url);
      expect(after.rules.map((rule) => [rule.name, rule.limit])).toEqual([
        ['per-key', 7],
        ['checkout', 3],
      ]);
      expect(after.keys.map((key) => [key.label, key.rule, key.limit, key.own])).toEqual([['d-checkout', 'checkout', 3, 1]]);
    } finally {
      await service.close();
    }
  });
});

describe('shadow mode', () => {
  it('decides and counts but never rejects', async () => {
    const path = join(dir, 'shadow.yaml');
    writeConfig(path, [fixed(1, { shadow: true })]);
    const service = await startRegionService(loadConfigFile(path, {}), { configPath: path });
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push(await check(service.url, 's'));
      expect(statuses).toEqual([200, 200, 200, 200]);
      const metrics = await registry.getSingleMetricAsString('quotafed_decisions_total');
      const shadowLimited = metrics
        .split('\n')
        .find((line) => line.includes('rule="per-key"') && line.includes('outcome="shadow_limited"'));
      expect(Number(shadowLimited?.split(' ').at(-1))).toBeGreaterThanOrEqual(3);
    } finally {
      await service.close();
    }
  });
});

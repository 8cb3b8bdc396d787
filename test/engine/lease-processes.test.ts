// Local leases across gateway processes on one Redis (test/support/lease-gateway.ts), one of them killed while it
// spends a lease: together they never admit more than the limit; the killed process's unspent lease stays spent
// (at most one lease), and the processes that stop return theirs, so Redis then counts exactly what was admitted.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { layoutOf } from '../../src/keys.ts';
import { freePort } from '../../src/ops/redis-process.ts';
import { startServiceProcess } from '../../src/ops/service-process.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);

const HOUR = 3_600_000;
const LIMIT = 2_000;
const SIZE = 25;
/** Decisions a gateway has in flight at once (test/support/lease-gateway.ts). */
const IN_FLIGHT = 4;
const rule = { name: 'hot', by: ['apiKey'], algorithm: 'fixedWindow', limit: LIMIT, period: HOUR, lease: { size: SIZE, ttlMs: 30_000 } };

interface Gateway {
  child: ChildProcess;
  output: string;
  exited: Promise<number | null>;
}

function gateway(apiKey: string): Gateway {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/lease-gateway.ts', server.url, JSON.stringify(rule), apiKey], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const started: Gateway = { child, output: '', exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))) };
  child.stdout!.on('data', (chunk: Buffer) => {
    started.output += chunk.toString();
  });
  return started;
}

const admitted = (g: Gateway) => g.output.match(/[rl]/g)?.length ?? 0;
const ready = (g: Gateway) => g.output.startsWith('!');

async function count(apiKey: string): Promise<number> {
  const config = parseConfig({ region: 'us-east', rules: [rule] });
  const key = layoutOf(config).ruleKey('hot', { principal: apiKey, dimensions: [apiKey] });
  const id = Math.floor(Date.now() / HOUR);
  const held = await redis.hmget(key, `w${id % 3}`, `c${id % 3}.0`);
  return Number(held[0]) === id ? Number(held[1] ?? 0) : 0;
}

async function until(check: () => boolean, what: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('local leases across gateway processes', () => {
  it('hold the limit with a process killed mid-lease, and count exactly what the others admitted', async () => {
    const apiKey = `hot-${Date.now()}`;
    const gateways = [gateway(apiKey), gateway(apiKey), gateway(apiKey)];
    const [victim, ...others] = gateways as [Gateway, Gateway, Gateway];
    await until(() => gateways.every(ready), 'the gateways to start');
    // The victim goes first, so it is spending from a lease (it has admitted from memory) well before the limit;
    // the others go, and it is killed as they begin.
    victim.child.stdin!.write('go\n');
    await until(
      () => (victim.output.match(/l/g)?.length ?? 0) >= 3 || victim.output.endsWith('\n'),
      'the first gateway to spend from a lease',
    );
    expect(victim.output.endsWith('\n'), 'the victim ran until refused: it never spent from a lease').toBe(false);
    for (const g of others) g.child.stdin!.write('go\n');
    await until(() => others.every((g) => admitted(g) > 0), 'the other gateways to admit');
    victim.child.kill('SIGKILL');
    await victim.exited;
    await Promise.all(others.map((g) => g.exited));
    for (const g of others) expect(g.output.endsWith('\n')).toBe(true);

    const total = gateways.reduce((sum, g) => sum + admitted(g), 0);
    const counted = await count(apiKey);
    // The bound: never more than the limit.
    expect(total).toBeLessThanOrEqual(LIMIT);
    // Redis counts every admission plus what the killed process held unspent (at most one lease) and the
    // admissions whose answers it had not written when it died (at most the 4 decisions it had in flight).
    const stranded = counted - total;
    expect(stranded).toBeGreaterThanOrEqual(0);
    expect(stranded).toBeLessThanOrEqual(SIZE + IN_FLIGHT);
    // The survivors ran until refused: the window is spent up to the stranded lease.
    expect(counted).toBe(LIMIT);
    // Leases did the work: most admissions came from memory.
    const fromLeases = gateways.reduce((sum, g) => sum + (g.output.match(/l/g)?.length ?? 0), 0);
    expect(fromLeases).toBeGreaterThan(total / 2);
  });

  it('give every unspent unit back when all processes stop', async () => {
    const apiKey = `calm-${Date.now()}`;
    const gateways = [gateway(apiKey), gateway(apiKey)];
    await until(() => gateways.every(ready), 'the gateways to start');
    for (const g of gateways) g.child.stdin!.write('go\n');
    await until(() => gateways.every((g) => admitted(g) >= 30), 'both gateways to admit');
    for (const g of gateways) g.child.stdin!.write('stop\n');
    await Promise.all(gateways.map((g) => g.exited));
    const total = gateways.reduce((sum, g) => sum + admitted(g), 0);
    expect(total).toBeLessThan(LIMIT);
    expect(await count(apiKey)).toBe(total);
  });
});

describe('local leases in the service', () => {
  it('answer /v1/check from a lease, and a SIGTERMed service gives its lease back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qf-lease-'));
    const port = await freePort();
    const config = {
      region: 'us-east',
      port,
      logLevel: 'warn',
      redis: { url: server.url },
      rules: [{ ...rule, match: { identity: 'apiKey' } }],
    };
    const configPath = join(dir, 'us-east.yaml');
    writeFileSync(configPath, toYaml(config));
    const service = await startServiceProcess({ region: 'us-east', configPath, port, root: process.cwd(), write: () => undefined });
    const apiKey = `served-${Date.now()}`;
    const sources: string[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const response = await fetch(`${service.url}/v1/check`, {
          method: 'POST',
          body: JSON.stringify({ apiKey, method: 'GET', path: '/x' }),
        });
        const answer = (await response.json()) as { allowed: boolean; outcomes: { source: string }[] };
        expect(answer.allowed).toBe(true);
        sources.push(answer.outcomes[0]!.source);
      }
    } finally {
      await service.stop();
    }
    // The second request took a lease (the key was seen within its time); later ones spent it.
    expect(sources.slice(0, 2)).toEqual(['redis', 'redis']);
    expect(sources.filter((source) => source === 'lease').length).toBeGreaterThan(0);
    // Stopped gracefully: what it had not spent went back, so Redis counts the 12 admissions.
    expect(await count(apiKey)).toBe(12);
  });
});

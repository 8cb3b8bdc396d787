// SIGKILL a region's service process (`quotafed serve`) under load and start it again. Every
// decision is one atomic script in Redis, so nothing the client was told is lost: the counter in Redis is at
// least the admissions the client received, and exceeds them by at most the requests in flight at the kill.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.ts';
import { matchRules } from '../../src/engine/rules.ts';
import { freePort } from '../../src/ops/redis-process.ts';
import { startServiceProcess, type ServiceProcess } from '../../src/ops/service-process.ts';
import { useRedis } from '../harness/redis.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const CONCURRENCY = 8;
const API_KEY = 'kill-victim';

/** Sum of this region's (index 0) counts in every window slot of a fixed-window state hash. */
function ownCount(hash: Record<string, string>): number {
  return Object.entries(hash)
    .filter(([field]) => /^c\d+\.0$/.test(field))
    .reduce((sum, [, value]) => sum + Number(value), 0);
}

describe('SIGKILL of a service process under load', async () => {
  const redis = await useRedis();
  const dir = mkdtempSync(join(tmpdir(), 'quotafed-kill-'));
  const processes: ServiceProcess[] = [];
  const inspector = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop(2_000)));
    inspector.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  it('loses no admission beyond the requests in flight at the kill', async () => {
    const port = await freePort();
    const raw = {
      region: 'kill-test',
      port,
      logLevel: 'warn',
      redis: { url: redis.url, commandTimeoutMs: 2_000 },
      rules: [
        {
          name: 'fw',
          match: { identity: 'apiKey' },
          by: ['apiKey'],
          algorithm: 'fixedWindow',
          limit: 1_000_000,
          period: '1h',
          failMode: 'closed',
        },
      ],
    };
    const configPath = join(dir, 'kill-test.yaml');
    writeFileSync(configPath, stringify(raw));
    const key = matchRules(parseConfig(raw, 'kill test'), { apiKey: API_KEY, ip: '127.0.0.1', method: 'GET', path: '/x' })[0]!.key;
    const output: string[] = [];
    const start = async () => {
      const service = await startServiceProcess({
        region: 'kill-test',
        configPath,
        port,
        root: ROOT,
        write: (line) => output.push(line),
        readyTimeoutMs: 30_000,
      });
      processes.push(service);
      return service;
    };

    let service = await start();
    const url = `${service.url}/v1/check`;
    const body = JSON.stringify({ apiKey: API_KEY, method: 'GET', path: '/x' });
    let admitted = 0;
    let failed = 0;
    let inFlight = 0;
    let running = true;
    const worker = async () => {
      while (running) {
        inFlight += 1;
        try {
          const res = await fetch(url, { method: 'POST', body, signal: AbortSignal.timeout(5_000) });
          const decision = (await res.json()) as { allowed?: boolean };
          if (res.status === 200 && decision.allowed === true) admitted += 1;
        } catch {
          failed += 1;
          await new Promise((r) => setTimeout(r, 20));
        } finally {
          inFlight -= 1;
        }
      }
    };
    const workers = Array.from({ length: CONCURRENCY }, worker);

    const waitForAdmissions = async (count: number) => {
      const deadline = Date.now() + 20_000;
      while (admitted < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(admitted).toBeGreaterThanOrEqual(count);
    };
    await waitForAdmissions(300);
    const inFlightAtKill = inFlight;
    process.kill(service.pid!, 'SIGKILL');
    const admittedAtKill = admitted;
    // The exit reaches this process asynchronously; on a loaded machine it can take longer than a fixed pause.
    const exitDeadline = Date.now() + 10_000;
    while (service.running() && Date.now() < exitDeadline) await new Promise((r) => setTimeout(r, 20));
    expect(service.running()).toBe(false);

    service = await start();
    await waitForAdmissions(admittedAtKill + 300);
    running = false;
    await Promise.all(workers);

    const counted = ownCount(await inspector.hgetall(key));
    expect(failed).toBeGreaterThan(0);
    expect(counted).toBeGreaterThanOrEqual(admitted);
    expect(counted - admitted).toBeLessThanOrEqual(inFlightAtKill);
    expect(inFlightAtKill).toBeLessThanOrEqual(CONCURRENCY);
    console.info(
      `service kill: client saw ${admitted} admissions, Redis counted ${counted} (${inFlightAtKill} in flight at the ` +
        `kill, ${failed} failed requests)`,
    );
  });
});

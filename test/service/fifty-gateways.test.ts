// 50 gateway instances (50 engines, each with its own Redis connection) in 5 processes hit one API key
// at once: exactly 1,000 are admitted, and nothing is admitted once a rejection has been seen.
import { fork, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import type { WorkerResult } from './gateway-worker.ts';

const PROCESSES = 5;
const ENGINES_PER_PROCESS = 10;
const REQUESTS_PER_ENGINE = 30; // 1,500 requests in all

describe('50 gateways, one key', async () => {
  const redis = await useRedis();
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  });

  it('admits exactly 1,000 and rejects everything after the limit', async () => {
    const config = {
      region: 'us-east',
      // Generous: 5 processes on 2 shared cores; this test is about correctness, not latency.
      redis: { url: redis.url, commandTimeoutMs: 5_000, connectTimeoutMs: 5_000 },
      // 1,000 per API key. The bucket refills per day, so no token returns during the test.
      rules: [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'tokenBucket', limit: 1000, period: '1d' }],
    };
    const worker = new URL('./gateway-worker.ts', import.meta.url).pathname;
    const ready: Promise<void>[] = [];
    const done: Promise<WorkerResult[]>[] = [];
    for (let id = 0; id < PROCESSES; id++) {
      const child = fork(worker, [String(id), String(ENGINES_PER_PROCESS), String(REQUESTS_PER_ENGINE)], {
        execArgv: ['--import', 'tsx'],
        env: { ...process.env, QUOTAFED_TEST_CONFIG: JSON.stringify(config) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      ready.push(
        new Promise((resolve, reject) => {
          child.once('message', () => resolve());
          child.once('exit', (code) => reject(new Error(`worker ${id} exited early with ${code}`)));
        }),
      );
      done.push(
        new Promise((resolve, reject) => {
          child.on('message', (message: { type: string; results?: WorkerResult[] }) => {
            if (message.type === 'results') resolve(message.results!);
          });
          child.once('exit', (code) => reject(new Error(`worker ${id} exited with ${code} before reporting`)));
        }),
      );
    }
    await Promise.all(ready);
    for (const child of children) child.send('go');
    const results = (await Promise.all(done)).flat();

    expect(results).toHaveLength(PROCESSES * ENGINES_PER_PROCESS * REQUESTS_PER_ENGINE);
    expect(results.filter((r) => r.error)).toEqual([]);
    expect(new Set(results.map((r) => `${r.worker}.${r.engine}`)).size).toBe(50);
    expect(results.filter((r) => r.allowed)).toHaveLength(1000);

    // In the order results came back, everything after the 1,000th admission is a rejection.
    const byReturn = [...results].sort((a, b) => a.returnedAt - b.returnedAt);
    const lastAdmission = byReturn.map((r) => r.allowed).lastIndexOf(true);
    expect(byReturn.filter((r, i) => i <= lastAdmission && r.allowed)).toHaveLength(1000);
    expect(byReturn.slice(lastAdmission + 1).every((r) => !r.allowed)).toBe(true);

    // The hard-limit property: once any gateway has seen a rejection, no request sent later is admitted.
    // Exact within a process (one clock); across processes within 5 ms of clock offset.
    for (let id = 0; id < PROCESSES; id++) {
      const own = results.filter((r) => r.worker === id);
      const firstRejection = Math.min(...own.filter((r) => !r.allowed).map((r) => r.returnedAt));
      expect(own.filter((r) => r.allowed && r.sentAt > firstRejection)).toEqual([]);
    }
    const firstRejectionAnywhere = Math.min(...results.filter((r) => !r.allowed).map((r) => r.returnedAt));
    expect(results.filter((r) => r.allowed && r.sentAt > firstRejectionAnywhere + 5)).toEqual([]);
  });
});

// `npm start` end to end: the launcher as a real process (as main.ts runs it), on free ports, driven with the
// requests its "try this" prints, then stopped with SIGINT.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort, portIsFree } from '../../src/ops/redis-process.ts';

const root = new URL('../../', import.meta.url).pathname;

interface Run {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function runLauncher(args: string[], env: NodeJS.ProcessEnv = process.env): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'launch', ...args], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout!.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => text, exited };
}

async function waitForOutput(run: Run, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const match = pattern.exec(run.output());
    if (match) return match;
    if (run.child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`launcher output never matched ${pattern}:\n${run.output()}`);
}

async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

describe('npm start (the launch command)', () => {
  it('says how to get redis-server when it is missing, and exits non-zero', async () => {
    const run = runLauncher([], { ...process.env, PATH: '/nonexistent' });
    expect(await run.exited).toBe(1);
    expect(run.output()).toMatch(/redis-server was not found on PATH.*apt-get install redis-server/s);
  });

  it('names a port that is taken and how to move, and exits non-zero without starting anything', async () => {
    const [taken, ...others] = await freePorts(7);
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(taken, '127.0.0.1', resolve));
    try {
      const run = runLauncher([
        '--redis-ports',
        `${taken},${others[0]},${others[1]}`,
        '--ports',
        others.slice(2, 5).join(','),
        '--upstream-port',
        String(others[5]),
      ]);
      expect(await run.exited).toBe(1);
      expect(run.output()).toContain(`${taken}  redis-server for us-east`);
      expect(run.output()).toContain('--redis-ports');
      for (const port of others) expect(await portIsFree(port)).toBe(true);
    } finally {
      blocker.close();
    }
  });

  it('rejects a malformed port list with usage', async () => {
    const run = runLauncher(['--redis-ports', '1,two,3']);
    expect(await run.exited).toBe(2);
    expect(run.output()).toMatch(/--redis-ports takes ports/);
  });

  it('launches three regions, behaves as its "try this" says, and stops everything on SIGINT', { timeout: 120_000 }, async () => {
    const ports = await freePorts(7);
    const redisPorts = ports.slice(0, 3);
    const servicePorts = ports.slice(3, 6);
    const upstreamPort = ports[6]!;
    const run = runLauncher([
      '--redis-ports',
      redisPorts.join(','),
      '--ports',
      servicePorts.join(','),
      '--upstream-port',
      String(upstreamPort),
    ]);
    try {
      const [, apiKey] = await waitForOutput(run, /X-API-Key: (demo-[0-9a-f]+)/, 90_000);
      await waitForOutput(run, /Ctrl-C stops every process/, 5_000);
      expect(run.output()).toMatch(/starting redis-server for us-east/);
      const [usEast, euWest, apSouth] = servicePorts.map((port) => `http://127.0.0.1:${port}`);
      for (const url of [usEast, euWest, apSouth]) expect(run.output()).toContain(url!);
      const headers = { 'X-API-Key': apiKey! };

      // An allowed request reaches the demo upstream and carries the rate-limit headers.
      const hello = await fetch(`${usEast}/hello`, { headers });
      expect(hello.status).toBe(200);
      expect(hello.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);
      expect(hello.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/);
      expect(await hello.json()).toMatchObject({ ok: true, path: '/hello', method: 'GET' });

      // /checkout: 10 per minute per key across the federation. Keep the sequence inside one minute window.
      const intoMinute = Date.now() % 60_000;
      if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 200));
      const statuses: number[] = [];
      for (let i = 0; i < 11; i += 1) {
        const response = await fetch(`${usEast}/checkout`, { headers });
        statuses.push(response.status);
        if (response.status === 429) expect(await response.json()).toEqual({ error: 'Rate limit exceeded' });
        else await response.arrayBuffer();
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      // us-east's own share (3) at once, then what the idle regions lend it (each keeps 1), then 429.
      const admittedHere = statuses.filter((status) => status === 200).length;
      expect(admittedHere).toBeGreaterThanOrEqual(5);
      expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
      expect(statuses.slice(admittedHere)).toEqual(Array<number>(11 - admittedHere).fill(429));

      // The same key from the other regions: the quota is global, so together they never pass 10.
      let admittedElsewhere = 0;
      for (const url of [euWest, apSouth]) {
        for (let i = 0; i < 5; i += 1) {
          const response = await fetch(`${url}/checkout`, { headers });
          await response.arrayBuffer();
          if (response.status === 200) admittedElsewhere += 1;
        }
      }
      expect(admittedHere + admittedElsewhere).toBeLessThanOrEqual(10);

      const metrics = await (await fetch(`${usEast}/metrics`)).text();
      expect(metrics).toMatch(/^quotafed_decisions_total\{/m);
      expect((await fetch(`${apSouth}/healthz`)).status).toBe(200);
    } finally {
      run.child.kill('SIGINT');
    }
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/SIGINT: stopping the local federation/);
    // Services stop before their Redis.
    const out = run.output();
    expect(out.indexOf('stopping redis-server')).toBeGreaterThan(out.lastIndexOf('stopping us-east'));
    expect(out).toMatch(/stopped\.\s*$/);
    for (const port of ports) expect(await portIsFree(port)).toBe(true);
  });
});

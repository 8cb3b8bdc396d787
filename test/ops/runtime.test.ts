// The runtime an operator gets: CI refuses an engine warning, the images run a supported LTS that `engines`
// admits, `quotafed --version` answers, and the README's way of running `serve` stops on SIGTERM.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { useRedis } from '../harness/redis.ts';

const root = new URL('../../', import.meta.url).pathname;
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as { version: string; engines: { node: string } };
const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };
const dir = mkdtempSync(join(tmpdir(), 'quotafed-runtime-'));
const redis = await useRedis();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('.ci/npm-ci-strict', () => {
  /** Runs the script with a stand-in `npm` that prints `output` and exits with `code`. */
  const run = (output: string, code = 0) => {
    const bin = mkdtempSync(join(dir, 'npm-'));
    writeFileSync(join(bin, 'output.txt'), `${output}\n`);
    writeFileSync(join(bin, 'npm'), `#!/bin/sh\ncat '${join(bin, 'output.txt')}' >&2\nexit ${code}\n`);
    chmodSync(join(bin, 'npm'), 0o755);
    return spawnSync('bash', [join(root, '.ci/npm-ci-strict'), '--no-audit'], {
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
      encoding: 'utf8',
    });
  };

  it('fails when npm ci prints an engine warning, and says so', () => {
    const result = run("npm warn EBADENGINE Unsupported engine { package: 'cockatiel@4.0.0', required: { node: '>=22' } }");
    expect(result.status).toBe(1);
    expect(result.stdout + result.stderr).toMatch(/npm ci printed EBADENGINE/);
  });

  it('passes a clean install and keeps npm failures', () => {
    expect(run('added 300 packages').status).toBe(0);
    expect(run('npm error code EUSAGE', 1).status).toBe(1);
  });

  it('is what .ci/run installs with', () => {
    expect(read('.ci/run')).toMatch(/^bash \.ci\/npm-ci-strict /m);
    expect(read('.ci/run')).not.toMatch(/^npm ci /m);
  });
});

describe('Node images', () => {
  const supportedLts = (image: string) => {
    const major = Number(/^node:(\d+)/.exec(image)?.[1]);
    expect([22, 24]).toContain(major);
    expect(semver.satisfies(`${major}.0.0`, pkg.engines.node)).toBe(true);
  };

  it('the Dockerfile and docker-compose.yml build on a supported LTS that engines admits', () => {
    const dockerfile = /^ARG NODE_IMAGE=(\S+)$/m.exec(read('Dockerfile'))?.[1];
    const compose = /NODE_IMAGE: (\S+)/.exec(read('docker-compose.yml'))?.[1];
    supportedLts(dockerfile!);
    expect(compose).toBe(dockerfile);
  });

  it('the Node running these tests is one engines admits', () => {
    expect(semver.satisfies(process.versions.node, pkg.engines.node)).toBe(true);
  });
});

describe('the quotafed command', () => {
  it('--version and -v print the package version', () => {
    for (const flag of ['--version', '-v']) {
      const result = spawnSync(process.execPath, [join(root, 'bin/quotafed.js'), flag], { encoding: 'utf8' });
      expect(result.status).toBe(0);
      expect(result.stdout).toBe(`${pkg.version}\n`);
    }
  });

  it('`node …/bin/quotafed.js serve` (the README form) stops on SIGTERM to the pid a supervisor holds', async () => {
    const config = join(dir, 'serve.yaml');
    writeFileSync(
      config,
      stringify({
        region: 'solo',
        port: 0,
        redis: { url: redis.url },
        rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 5, period: '1m' }],
      }),
    );
    const child = spawn(process.execPath, [join(root, 'bin/quotafed.js'), 'serve', '--config', config], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      let output = '';
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), 30_000);
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          const match = /"event":"service\.listening","url":"([^"]+)"/.exec(output);
          if (match) {
            clearTimeout(timer);
            resolve(match[1]!);
          }
        });
      });
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      child.kill('SIGTERM');
      const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 15_000))]);
      expect(code).toBe(0);
      await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});

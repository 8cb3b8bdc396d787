// `quotafed check-config` as an operator runs it: an invalid duration names the accepted forms, and a bad value
// that came from a QUOTAFED_* variable is blamed on the variable, not on the file (exit code 2 either way).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const bin = new URL('../../bin/quotafed.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'quotafed-check-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function checkConfig(yaml: string, env: Record<string, string> = {}): { status: number | null; stderr: string; stdout: string } {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, yaml);
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('QUOTAFED_')));
  const result = spawnSync(process.execPath, [bin, 'check-config', '--config', path], { env: { ...clean, ...env }, encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr, stdout: result.stdout };
}

const RULE = '  - { name: per-key, by: [apiKey], algorithm: fixedWindow, limit: 5, period: 1m }\n';
const PEERS = 'federation:\n  peers:\n    - { name: eu-west, redisUrl: "redis://eu-west.internal:6379" }\n';

describe('quotafed check-config errors', () => {
  it('names the accepted duration forms for `period: 1 minute`', () => {
    const result = checkConfig(
      'region: us-east\nrules:\n  - { name: a, by: [apiKey], algorithm: fixedWindow, limit: 5, period: 1 minute }\n',
    );
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(
      'rules[0].period: expected a duration: a whole number of milliseconds, or "500ms", "10s", "1m", "1h" or "1d"',
    );
    expect(result.stderr).not.toContain('Invalid input');
  });

  it('names the accepted leakage budget forms', () => {
    const result = checkConfig(`region: us-east\nfederation:\n  leakageBudget: five\n  peers: []\nrules:\n${RULE}`);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('federation.leakageBudget: expected a count such as 50, a percentage such as "5%", or "unbounded"');
  });

  it('blames QUOTAFED_REDIS_URL, not the file, for a bad Redis URL from the environment', () => {
    const result = checkConfig(`region: us-east\nrules:\n${RULE}`, { QUOTAFED_REDIS_URL: 'localhost:6379' });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(
      /invalid environment for config \S+:\n {2}QUOTAFED_REDIS_URL \(sets redis\.url\): expected a redis:\/\/ or rediss:\/\/ URL/,
    );
    expect(result.stderr).not.toContain('localhost:6379'); // values are not echoed (they may hold a password)
  });

  it("blames QUOTAFED_PEER_<NAME>_REDIS_URL for a bad peer URL, and the file for the file's own mistakes", () => {
    const result = checkConfig(
      `region: us-east\n${PEERS}rules:\n  - { name: a, by: [apiKey], algorithm: fixedWindow, limit: 5, period: 1 minute }\n`,
      {
        QUOTAFED_PEER_EU_WEST_REDIS_URL: 'http://eu-west.internal',
      },
    );
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^quotafed: invalid config /);
    expect(result.stderr).toContain(
      'QUOTAFED_PEER_EU_WEST_REDIS_URL (sets federation.peers[0].redisUrl): expected a redis:// or rediss:// URL',
    );
    expect(result.stderr).toContain('  rules[0].period: expected a duration');
  });

  it('accepts the same file with good values from the environment', () => {
    const result = checkConfig(`region: us-east\n${PEERS}rules:\n${RULE}`, {
      QUOTAFED_REDIS_URL: 'redis://127.0.0.1:6390',
      QUOTAFED_PEER_EU_WEST_REDIS_URL: 'rediss://gossip:pw@eu-west.internal:6380',
    });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^config OK: region us-east, 1 rule\(s\): per-key/);
  });
});

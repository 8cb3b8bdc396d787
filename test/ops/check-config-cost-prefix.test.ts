// `quotafed check-config` on rules[].costFromResponse and redis.keyPrefix: a bad value exits 2 naming the field.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const bin = new URL('../../bin/quotafed.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'quotafed-check-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function checkConfig(yaml: string): { status: number | null; stderr: string; stdout: string } {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, yaml);
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('QUOTAFED_')));
  const result = spawnSync(process.execPath, [bin, 'check-config', '--config', path], { env: clean, encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr, stdout: result.stdout };
}

const rule = (extra: string) => `rules:\n  - { name: llm, by: [apiKey], algorithm: fixedWindow, limit: 1000, period: 1m${extra} }\n`;

describe('check-config: costFromResponse', () => {
  it('accepts a reserve within the limit', () => {
    const result = checkConfig(`region: us-east\n${rule(', costFromResponse: { header: x-tokens-used, reserve: 100 }')}`);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('refuses a reserve above the limit, naming the field', () => {
    const result = checkConfig(`region: us-east\n${rule(', costFromResponse: { header: x-tokens-used, reserve: 5000 }')}`);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("rules[0].costFromResponse.reserve: the reserve (5000) exceeds the rule's limit (1000)");
  });

  it('refuses a header that is not a header name', () => {
    const result = checkConfig(`region: us-east\n${rule(', costFromResponse: { header: "x tokens", reserve: 10 }')}`);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('rules[0].costFromResponse.header: expected an HTTP header name');
  });
});

describe('check-config: redis.keyPrefix', () => {
  it('accepts a prefix of letters, digits, "_" and "-"', () => {
    const result = checkConfig(`region: us-east\nredis: { keyPrefix: tenant-b_2 }\n${rule('')}`);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  for (const bad of ['"a:b"', '"{qf}"', '"qf*"', '""', 'a-prefix-longer-than-thirty-two-chars']) {
    it(`refuses ${bad}, naming redis.keyPrefix`, () => {
      const result = checkConfig(`region: us-east\nredis: { keyPrefix: ${bad} }\n${rule('')}`);
      expect(result.status).toBe(2);
      expect(result.stderr).toContain('redis.keyPrefix');
    });
  }
});

// envoyproxy/ratelimit config files as quotafed rules: a file next to the region config is read and converted;
// a bad document is a config error naming the field (check-config exits 2 with it).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ConfigError, loadConfigFile, parseConfig } from '../../src/config/load.ts';

const dir = mkdtempSync(join(tmpdir(), 'qf-envoy-import-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const REGION = `region: solo
redis: { url: "redis://127.0.0.1:1" }
rules:
  - { name: per-key, limit: 1000 }
`;

describe('envoyproxy/ratelimit import', () => {
  it('reads envoy.files relative to the config file (several YAML documents) and builds fixed-window rules', () => {
    write(
      'ratelimit.yaml',
      `domain: rl
descriptors:
  - key: generic_key
    value: default
    rate_limit: { unit: SECOND, requests_per_unit: 50 }
---
domain: other
descriptors:
  - key: header_match
    value: bots
    descriptors:
      - key: remote_address
        rate_limit: { unit: day, requests_per_unit: 1000 }
`,
    );
    const config = loadConfigFile(write('region.yaml', `${REGION}envoy:\n  files: [ratelimit.yaml]\n  failMode: closed\n`), {});
    const imported = config.rules.filter((r) => r.match.envoy);
    expect(
      imported.map((r) => ({
        name: r.name,
        limit: r.limit,
        period: r.period,
        algorithm: r.algorithm,
        failMode: r.failMode,
        match: r.match.envoy,
      })),
    ).toEqual([
      {
        name: 'envoy.rl.generic_key_default',
        limit: 50,
        period: 1_000,
        algorithm: 'fixedWindow',
        failMode: 'closed',
        match: { domain: 'rl', descriptor: [{ key: 'generic_key', value: 'default' }] },
      },
      {
        name: 'envoy.other.header_match_bots.remote_address',
        limit: 1_000,
        period: 86_400_000,
        algorithm: 'fixedWindow',
        failMode: 'closed',
        match: { domain: 'other', descriptor: [{ key: 'header_match', value: 'bots' }, { key: 'remote_address' }] },
      },
    ]);
  });

  it('names the bad field of an invalid document', () => {
    write('bad.yaml', 'domain: rl\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 5 }\n');
    const bad = () => loadConfigFile(write('region-bad.yaml', `${REGION}envoy:\n  files: [bad.yaml]\n`), {});
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/rate_limit\.unit: expected second, minute, hour, day, week, month, year/);
    const inline = () =>
      loadConfigFile(
        write(
          'region-inline.yaml',
          `${REGION}envoy:\n  configs:\n    - domain: d\n      descriptors: [{ key: k, rate_limit: { unit: minute, ` +
            `requests_per_unit: 1, unlimited: true } }]\n`,
        ),
        {},
      );
    // As envoyproxy/ratelimit: an unlimited limit has no unit.
    expect(inline).toThrow(/envoy\.configs\[0\]\.descriptors\[0\]\.rate_limit\.unit: no unit with unlimited: true/);
    const missing = () => loadConfigFile(write('region-missing.yaml', `${REGION}envoy:\n  files: [nope.yaml]\n`), {});
    expect(missing).toThrow(/envoy\.files\[0\]/);
  });

  const importOf = (descriptors: unknown[], extra = '') => {
    const path = write(
      'region-units.yaml',
      `${REGION}envoy:\n  configs:\n    - domain: d\n      descriptors: ${JSON.stringify(descriptors)}\n${extra}`,
    );
    return loadConfigFile(path, {}).rules.filter((r) => r.match.envoy);
  };

  it('imports week, month and year units as fixed windows of 7, 30 and 365 days', () => {
    const rules = importOf(
      ['WEEK', 'month', 'year', 'day'].map((unit, i) => ({ key: `k${i}`, rate_limit: { unit, requests_per_unit: 10 } })),
    );
    expect(rules.map((r) => [r.name, r.period, r.limit])).toEqual([
      ['envoy.d.k0', 7 * 86_400_000, 10],
      ['envoy.d.k1', 30 * 86_400_000, 10],
      ['envoy.d.k2', 365 * 86_400_000, 10],
      ['envoy.d.k3', 86_400_000, 10],
    ]);
  });

  it('imports unlimited: true as an unlimited rule, and refuses a limit with neither unit nor unlimited', () => {
    const [ldap, azure] = importOf([
      { key: 'ldap', rate_limit: { unlimited: true } },
      { key: 'azure', rate_limit: { unit: 'minute', requests_per_unit: 100 } },
    ]);
    expect(ldap).toMatchObject({ name: 'envoy.d.ldap', unlimited: true, match: { envoy: { domain: 'd', descriptor: [{ key: 'ldap' }] } } });
    expect(azure!.unlimited).toBeUndefined();
    expect(() => importOf([{ key: 'k', rate_limit: { requests_per_unit: 5 } }])).toThrow(
      /envoy\.configs\[0\]\.descriptors\[0\]\.rate_limit\.unit: required \(or unlimited: true\)/,
    );
  });

  it('resolves replaces by rate_limit.name within the domain and names a dangling or self replacement', () => {
    const rules = importOf([
      {
        key: 'key_1',
        value: 'value_1',
        descriptors: [{ key: 'user', rate_limit: { name: 'specific', unit: 'second', requests_per_unit: 5 } }],
      },
      { key: 'other', rate_limit: { name: 'specific', unit: 'second', requests_per_unit: 7 } },
      {
        key: 'key_2',
        value: 'value_2',
        descriptors: [{ key: 'user', rate_limit: { replaces: [{ name: 'specific' }], unit: 'second', requests_per_unit: 10 } }],
      },
    ]);
    expect(rules.map((r) => [r.name, r.replaces])).toEqual([
      ['envoy.d.key_1_value_1.user', undefined],
      ['envoy.d.other', undefined],
      ['envoy.d.key_2_value_2.user', ['envoy.d.key_1_value_1.user', 'envoy.d.other']],
    ]);
    expect(() => importOf([{ key: 'k', rate_limit: { replaces: [{ name: 'nope' }], unit: 'second', requests_per_unit: 1 } }])).toThrow(
      /envoy\.configs\[0\]\.descriptors\[0\]\.rate_limit\.replaces\[0\]\.name: no rate_limit named "nope" in domain "d"/,
    );
    expect(() =>
      importOf([{ key: 'k', rate_limit: { name: 'me', replaces: [{ name: 'me' }], unit: 'second', requests_per_unit: 1 } }]),
    ).toThrow(/rate_limit\.replaces\[0\]\.name: a limit cannot replace itself/);
    // Fields envoyproxy/ratelimit has and quotafed does not support are still refused by name.
    expect(() => importOf([{ key: 'k', quota_mode: true, rate_limit: { unit: 'second', requests_per_unit: 1 } }])).toThrow(/quota_mode/);
  });

  it('checks hand-written unlimited and replaces: Envoy rules only, replaced rules in the same domain', () => {
    const base = { region: 'solo', redis: { url: 'redis://127.0.0.1:1' } };
    const envoyRule = (name: string, domain: string, extra: Record<string, unknown> = {}) => ({
      name,
      match: { envoy: { domain, descriptor: [{ key: name }] } },
      limit: 5,
      ...extra,
    });
    expect(() => parseConfig({ ...base, rules: [{ name: 'http', limit: 5, unlimited: true }] }, 't')).toThrow(
      /rules\[0\]\.unlimited: unlimited applies to Envoy rules \(match\.envoy\) only/,
    );
    expect(() => parseConfig({ ...base, rules: [envoyRule('a', 'd1'), envoyRule('b', 'd2', { replaces: ['a'] })] }, 't')).toThrow(
      /rules\[1\]\.replaces\[0\]: no Envoy rule "a" in domain "d2"/,
    );
    const ok = parseConfig({ ...base, rules: [envoyRule('a', 'd1'), envoyRule('b', 'd1', { replaces: ['a'] })] }, 't');
    expect(ok.rules[1]!.replaces).toEqual(['a']);
  });

  it('QUOTAFED_GRPC_PORT sets grpc.port', () => {
    const config = loadConfigFile(write('region-port.yaml', REGION), { QUOTAFED_GRPC_PORT: '50123' });
    expect(config.grpc).toEqual({ port: 50123, unknownDomain: 'ok' });
  });
});

describe('policy reload with envoy imports', () => {
  it('takes changed inline envoyproxy/ratelimit documents and changed files without a restart', async () => {
    const { restartOnlyChanges } = await import('../../src/policy.ts');
    write('reload-rl.yaml', 'domain: rl\ndescriptors:\n  - { key: k, rate_limit: { unit: minute, requests_per_unit: 5 } }\n');
    const path = write(
      'region-reload.yaml',
      `${REGION}envoy:\n  files: [reload-rl.yaml]\n  configs: [{ domain: d, descriptors: [{ key: a, rate_limit: { unit: second, ` +
        `requests_per_unit: 1 } }] }]\n`,
    );
    const before = loadConfigFile(path, {});
    write('reload-rl.yaml', 'domain: rl\ndescriptors:\n  - { key: k, rate_limit: { unit: minute, requests_per_unit: 7 } }\n');
    write(
      'region-reload.yaml',
      `${REGION}envoy:\n  files: [reload-rl.yaml]\n  configs: [{ domain: d, descriptors: [{ key: a, rate_limit: { unit: second, ` +
        `requests_per_unit: 2 } }] }]\n`,
    );
    const after = loadConfigFile(path, {});
    expect(restartOnlyChanges(before, after)).toEqual([]);
    expect(after.rules.filter((r) => r.match.envoy).map((r) => r.limit)).toEqual([2, 7]);
  });
});

describe('docs/envoy.md', () => {
  const doc = readFileSync(new URL('../../docs/envoy.md', import.meta.url), 'utf8');
  const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);

  it('shows quotafed configs that validate and an Envoy bootstrap that parses', () => {
    const region = blocks.find((b) => b.startsWith('region:'))!;
    const config = parseConfig(parseYaml(region), 'docs/envoy.md region config');
    expect(config.grpc).toMatchObject({ port: 8181 });
    expect(config.rules.every((r) => r.match.envoy?.domain === 'edge')).toBe(true);

    const importBlock = blocks.find((b) => b.startsWith('envoy:'))!.replace('  files: [ratelimit/config.yaml]', '  files: []');
    const imported = parseConfig({ ...(parseYaml(REGION) as object), ...(parseYaml(importBlock) as object) }, 'docs/envoy.md import');
    expect(imported.rules.filter((r) => r.match.envoy).map((r) => r.name)).toEqual([
      'envoy.edge.remote_address',
      'envoy.edge.remote_address_10.0.0.9',
      'envoy.edge.generic_key_checkout.api_key',
    ]);

    // The unlimited / replaces / week example.
    const extended = blocks.filter((b) => b.startsWith('envoy:'))[1]!;
    const rules = parseConfig(
      { ...(parseYaml(REGION) as object), ...(parseYaml(extended) as object) },
      'docs/envoy.md extended import',
    ).rules.filter((r) => r.match.envoy);
    expect(rules.map((r) => [r.name, r.unlimited ?? false, r.period, r.replaces])).toEqual([
      ['envoy.internal.ldap', true, 1_000, undefined],
      ['envoy.internal.azure', false, 7 * 86_400_000, undefined],
      ['envoy.internal.key_1_value_1.user', false, 1_000, undefined],
      ['envoy.internal.key_2_value_2.user', false, 1_000, ['envoy.internal.key_1_value_1.user']],
    ]);

    const bootstrap = JSON.stringify(parseYaml(blocks.find((b) => b.startsWith('static_resources:'))!));
    for (const needed of [
      'envoy.filters.http.ratelimit',
      '"failure_mode_deny":false',
      '"rate_limited_as_resource_exhausted":true',
      '"cluster_name":"quotafed_rls"',
      '"http2_protocol_options":{}',
      '"grpc_health_check":{}',
      '"domain":"edge"',
    ]) {
      expect(bootstrap).toContain(needed);
    }
  });
});

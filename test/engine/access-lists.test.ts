// The allow and deny lists as the engine matches them (src/engine/access-lists.ts) and as the config validates
// them (src/config/schema.ts, src/config/cidr.ts): canonical IP entries, IPv4/IPv6 containment on the full address,
// a prefix key matched only by a range that holds it whole, deny over allow, and errors that name the field.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { parseIpRange } from '../../src/config/cidr.ts';
import { combinedVerdict, compileLists, listVerdict, NO_LISTS } from '../../src/engine/access-lists.ts';
import type { RequestContext } from '../../src/engine/types.ts';

const request = (over: Partial<RequestContext>): RequestContext => ({ ip: '192.0.2.1', method: 'GET', path: '/', ...over });

function configError(input: unknown): ConfigError {
  try {
    parseConfig(input);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('the config was accepted');
}

const base = { region: 'local', rules: [{ name: 'per-key', limit: 10 }] };

describe('IP entries', () => {
  it('parses addresses and CIDR ranges into one canonical spelling', () => {
    expect(parseIpRange('2001:DB8:0::/32')).toEqual({
      ok: true,
      range: { family: 6, network: '2001:db8::', prefix: 32, text: '2001:db8::/32' },
    });
    expect(parseIpRange('203.0.113.7')).toEqual({
      ok: true,
      range: { family: 4, network: '203.0.113.7', prefix: 32, text: '203.0.113.7' },
    });
    expect(parseIpRange('10.0.0.0/8')).toMatchObject({ ok: true, range: { text: '10.0.0.0/8' } });
    expect(parseIpRange('::ffff:10.0.0.0/104')).toMatchObject({ ok: true, range: { family: 6, prefix: 104 } });
    expect(parseIpRange('10.0.0.5/8')).toEqual({ ok: false, reason: 'host bits are set: did you mean 10.0.0.0/8?' });
    expect(parseIpRange('2001:db8::1/32')).toEqual({ ok: false, reason: 'host bits are set: did you mean 2001:db8::/32?' });
    expect(parseIpRange('10.0.0.0/33')).toEqual({ ok: false, reason: 'the prefix length must be 0-32' });
    expect(parseIpRange('fe80::1%eth0')).toMatchObject({ ok: false });
    expect(parseIpRange('not-an-ip')).toMatchObject({ ok: false });
  });
});

describe('list verdicts', () => {
  const lists = compileLists({
    allow: [{ apiKey: 'internal-batch' }, { ip: '10.0.0.0/8' }, { ip: '2001:db8:a::/48' }],
    deny: [{ apiKey: 'leaked' }, { ip: '2001:db8:bad::/48' }, { ip: '2001:db8:0:1::5' }, { ip: '10.9.9.9' }],
  });

  it('matches API keys exactly and IPs by containment', () => {
    expect(listVerdict(lists, request({ apiKey: 'internal-batch' }), 'config')).toEqual({
      list: 'allow',
      kind: 'apiKey',
      source: 'config',
    });
    expect(listVerdict(lists, request({ apiKey: 'internal-batch2' }), 'config')).toBeUndefined();
    expect(listVerdict(lists, request({ ip: '10.200.3.4' }), 'config')).toEqual({ list: 'allow', kind: 'ip', source: 'config' });
    expect(listVerdict(lists, request({ ip: '11.0.0.1' }), 'config')).toBeUndefined();
    expect(listVerdict(lists, request({ ip: '2001:db8:a::/64', address: '2001:db8:a:ffff::1' }), 'admin')).toEqual({
      list: 'allow',
      kind: 'ip',
      source: 'admin',
    });
  });

  it('matches the full IPv6 address, not the /64 key the rules count by', () => {
    // Same /64 as the denied 2001:db8:0:1::5, another address: not denied.
    expect(listVerdict(lists, request({ ip: '2001:db8:0:1::/64', address: '2001:db8:0:1::6' }), 'config')).toBeUndefined();
    expect(listVerdict(lists, request({ ip: '2001:db8:0:1::/64', address: '2001:db8:0:1::5' }), 'config')?.list).toBe('deny');
    expect(listVerdict(lists, request({ ip: '2001:db8:bad::/64', address: '2001:db8:bad:7:1:2:3:4' }), 'config')?.list).toBe('deny');
    // A zone id is not part of the address.
    expect(listVerdict(lists, request({ ip: 'x', address: '2001:db8:0:1::5%eth0' }), 'config')?.list).toBe('deny');
  });

  it('without the full address, a prefix key matches only a range that holds the whole prefix', () => {
    expect(listVerdict(lists, request({ ip: '2001:db8:bad:1::/64' }), 'config')?.list).toBe('deny');
    expect(listVerdict(lists, request({ ip: '2001:db8:0:1::/64' }), 'config')).toBeUndefined();
  });

  it('deny wins over allow, from either source', () => {
    expect(listVerdict(lists, request({ apiKey: 'internal-batch', ip: '10.9.9.9' }), 'config')).toEqual({
      list: 'deny',
      kind: 'ip',
      source: 'config',
    });
    const admin = compileLists({ allow: [], deny: [{ apiKey: 'internal-batch' }] });
    expect(combinedVerdict(lists, admin, request({ apiKey: 'internal-batch' }))).toEqual({ list: 'deny', kind: 'apiKey', source: 'admin' });
    expect(combinedVerdict(NO_LISTS, NO_LISTS, request({ apiKey: 'internal-batch' }))).toBeUndefined();
  });
});

describe('config validation', () => {
  it('accepts lists and stores IP entries canonically', () => {
    const config = parseConfig({ ...base, lists: { allow: [{ ip: '2001:DB8::/32', comment: 'office' }], deny: [{ apiKey: 'k' }] } });
    expect(config.lists).toEqual({ allow: [{ ip: '2001:db8::/32', comment: 'office' }], deny: [{ apiKey: 'k' }], refreshMs: 1000 });
    expect(parseConfig(base).lists).toEqual({ allow: [], deny: [], refreshMs: 1000 });
  });

  it('names the bad list field', () => {
    const error = configError({ ...base, lists: { deny: [{ ip: '10.0.0.5/8' }, { apiKey: 'a', ip: '10.0.0.1' }, {}] } });
    expect(error.fields).toEqual(['lists.deny[0].ip', 'lists.deny[1]', 'lists.deny[2]']);
    expect(error.message).toContain('did you mean 10.0.0.0/8?');
    expect(error.message).toContain('exactly one of apiKey or ip');
  });

  it('validates a rule denial with clear field errors', () => {
    const ok = parseConfig({
      ...base,
      rules: [{ name: 'r', limit: 1, denial: { contentType: 'application/problem+json', body: '{"rule":"{rule}"}' } }],
    });
    expect(ok.rules[0]!.denial).toEqual({ status: 429, body: '{"rule":"{rule}"}', contentType: 'application/problem+json' });
    expect(parseConfig({ ...base, rules: [{ name: 'r', limit: 1, denial: { status: 503 } }] }).rules[0]!.denial).toEqual({
      status: 503,
      body: '{"error":"Rate limit exceeded"}',
      contentType: 'application/json',
    });
    const error = configError({
      ...base,
      rules: [{ name: 'r', limit: 1, denial: { status: 302, body: 'wait {retryAfter}s, {who}', contentType: 'json please' } }],
    });
    expect(error.fields).toEqual(['rules[0].denial.status', 'rules[0].denial.body', 'rules[0].denial.contentType']);
    expect(error.message).toContain('a denial status is 400-599');
    expect(error.message).toContain('unknown placeholder {who}');
    expect(error.message).toContain('expected a media type');
  });
});

// Plans in the config (docs/plans.md): the errors name the field (and check-config exits 2), each (rule, plan) pair
// with parameters of its own becomes a configured rule with its own fingerprint, and matchRules picks the plan's
// rule, both plans' rules through a change, none for an unlimited plan.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { choosePlan } from '../../src/engine/plans.ts';
import { matchRules } from '../../src/engine/rules.ts';
import { ruleFingerprints } from '../../src/federation/rule-identity.ts';

const RULES = [
  { name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 50, period: '1m' },
  {
    name: 'search',
    match: { identity: 'apiKey', endpoints: ['/search'] },
    by: ['apiKey', 'endpoint'],
    algorithm: 'slidingWindow',
    limit: 20,
    period: '10s',
  },
  { name: 'anonymous', match: { identity: 'anonymous' }, by: ['ip'], algorithm: 'fixedWindow', limit: 5, period: '1m' },
];
const PLANS = {
  default: 'free',
  tiers: {
    free: { 'per-key': { limit: 10 } },
    pro: { 'per-key': { limit: 1000 }, search: { limit: 200, period: '1m' } },
    same: { 'per-key': { limit: 50 } },
    unlimited: 'unlimited',
  },
  keys: { 'partner-key': 'pro' },
};

function fieldsOf(plans: unknown, rules: unknown[] = RULES): { fields: string[]; message: string } {
  try {
    parseConfig({ region: 'us-east', plans, rules });
  } catch (error) {
    if (error instanceof ConfigError) return { fields: error.fields, message: error.message };
    throw error;
  }
  throw new Error('the config validated');
}

describe('plans in the config', () => {
  const config = parseConfig({ region: 'us-east', plans: PLANS, rules: RULES });
  const request = (apiKey: string, path = '/items') => ({ apiKey, ip: '192.0.2.1', method: 'GET', path });
  const names = (apiKey: string, path?: string, plan?: Parameters<typeof matchRules>[1]['plan']) =>
    matchRules(config, { ...request(apiKey, path), plan }).map((m) => m.rule.name);

  it('derives a configured rule per (rule, plan) with its own parameters, each with its own fingerprint', () => {
    expect(config.rules.map((rule) => rule.name)).toEqual([
      'per-key',
      'search',
      'anonymous',
      'per-key.plan-free',
      'per-key.plan-pro',
      'search.plan-pro',
    ]);
    const pro = config.rules.find((rule) => rule.name === 'search.plan-pro')!;
    expect(pro).toMatchObject({ algorithm: 'slidingWindow', limit: 200, period: 60_000, match: { endpoints: ['/search'] } });
    expect(config.plans.routes['per-key']).toEqual({
      free: 'per-key.plan-free',
      pro: 'per-key.plan-pro',
      same: 'per-key',
      unlimited: null,
    });
    expect(config.plans.routes.search).toEqual({ free: 'search', pro: 'search.plan-pro', same: 'search', unlimited: null });
    const fingerprints = ruleFingerprints(config, 3);
    expect(new Set(['per-key', 'per-key.plan-free', 'per-key.plan-pro'].map((name) => fingerprints.get(name))).size).toBe(3);
  });

  it('picks the rule of the key’s plan: the default, the config’s assignment, none for unlimited', () => {
    expect(names('someone')).toEqual(['per-key.plan-free']);
    expect(names('someone', '/search')).toEqual(['per-key.plan-free', 'search']);
    expect(names('partner-key', '/search')).toEqual(['per-key.plan-pro', 'search.plan-pro']);
    expect(names('x', '/search', { plan: 'unlimited' })).toEqual([]);
    // The anonymous rule takes no plan.
    expect(matchRules(config, { ip: '192.0.2.1', method: 'GET', path: '/' }).map((m) => m.rule.name)).toEqual(['anonymous']);
  });

  it('decides under both plans through a change, for the longer period plus maxClockSkewMs', () => {
    const changedAt = 1_000_000;
    const at = (now: number) => names('k', '/search', { plan: 'pro', previous: 'free', changedAt, now });
    expect(at(changedAt)).toEqual(['per-key.plan-pro', 'per-key.plan-free', 'search.plan-pro', 'search']);
    // search: max(10 s, 1 m) + 1 s; per-key: 1 m + 1 s.
    expect(at(changedAt + 60_999)).toEqual(['per-key.plan-pro', 'per-key.plan-free', 'search.plan-pro', 'search']);
    expect(at(changedAt + 61_000)).toEqual(['per-key.plan-pro', 'search.plan-pro']);
    // To unlimited: the old plan still decides until the transition ends.
    expect(names('k', '/', { plan: 'unlimited', previous: 'pro', changedAt, now: changedAt + 10 })).toEqual(['per-key.plan-pro']);
    expect(names('k', '/', { plan: 'unlimited', previous: 'pro', changedAt, now: changedAt + 61_000 })).toEqual([]);
  });

  it('choosePlan: the admin assignment wins, opens a transition, and a deletion goes back to the config', () => {
    const now = 5_000_000;
    expect(choosePlan(config, undefined, 'partner-key', now)).toEqual({ plan: 'pro' });
    const assigned = { plan: 'unlimited', previous: 'pro', at: now - 1_000, region: 'eu-west' };
    expect(choosePlan(config, assigned, 'partner-key', now)).toEqual({ plan: 'unlimited', previous: 'pro', changedAt: now - 1_000, now });
    expect(choosePlan(config, assigned, 'partner-key', now + 120_000)).toEqual({ plan: 'unlimited' });
    expect(choosePlan(config, { ...assigned, plan: null, previous: 'unlimited' }, 'x', now)).toMatchObject({
      plan: 'free',
      previous: 'unlimited',
    });
    // A plan a reload removed decides nothing: back to the config's.
    expect(choosePlan(config, { ...assigned, plan: 'gold' }, 'x', now + 120_000)).toEqual({ plan: 'free' });
  });

  it('names the bad field', () => {
    expect(fieldsOf({ ...PLANS, default: 'gold' })).toMatchObject({ fields: ['plans.default'] });
    expect(fieldsOf({ ...PLANS, default: 'gold' }).message).toContain(
      'plans.default: no plan "gold" in plans.tiers (known: free, pro, same, unlimited)',
    );
    expect(fieldsOf({ tiers: { free: { nope: { limit: 1 } } } }).message).toContain('plans.tiers.free.nope: no rule named "nope"');
    expect(fieldsOf({ tiers: { free: { anonymous: { limit: 1 } } } }).message).toContain(
      'plans.tiers.free.anonymous: rule "anonymous" is not keyed by apiKey',
    );
    expect(fieldsOf({ tiers: { free: {} }, keys: { k: 'pro' } }).fields).toEqual(['plans.keys.k']);
    expect(fieldsOf({ tiers: { free: { 'per-key': {} } } }).message).toContain('plans.tiers.free.per-key: a plan override sets limit');
    expect(fieldsOf({ tiers: { free: 'lots' } }).fields).toEqual(['plans.tiers.free']);
    expect(fieldsOf({ tiers: { 'b@d': 'unlimited' } }).message).toContain('plans.tiers.b@d: plan names use letters');
    expect(fieldsOf({ tiers: { free: { 'per-key': { limit: 0 } } } }).fields).toEqual(['plans.tiers.free.per-key.limit']);
    const taken = [...RULES, { name: 'per-key.plan-free', by: ['apiKey'], limit: 1 }];
    expect(fieldsOf({ tiers: { free: { 'per-key': { limit: 1 } } } }, taken).message).toContain('is taken by a configured rule');
  });

  describe('check-config', () => {
    const dir = mkdtempSync(join(tmpdir(), 'quotafed-plans-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    it('exits 2 naming the field', () => {
      const path = join(dir, 'bad.yaml');
      writeFileSync(
        path,
        'region: us-east\nplans:\n  default: gold\n  tiers:\n    free: { per-key: { limit: 10 } }\nrules:\n  - { name: per-key, by: [apiKey], algorithm: fixedWindow, limit: 5, period: 1m }\n',
      );
      const bin = new URL('../../bin/quotafed.js', import.meta.url).pathname;
      const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('QUOTAFED_')));
      const result = spawnSync(process.execPath, [bin, 'check-config', '--config', path], { env, encoding: 'utf8' });
      expect(result.status).toBe(2);
      expect(result.stderr).toContain('plans.default: no plan "gold" in plans.tiers');
    });
  });
});

describe('a loaded config with plans', () => {
  it('loads again when spread into another: the same rules, no derived rule twice', () => {
    const config = parseConfig({
      region: 'us-east',
      plans: { default: 'free', tiers: { free: { 'per-key': { limit: 5 } }, pro: { 'per-key': { limit: 50 } } } },
      rules: [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 10, period: '1m' }],
    });
    const again = parseConfig({ ...config, port: 0 });
    expect(again.rules.map((rule) => rule.name)).toEqual(config.rules.map((rule) => rule.name));
    expect(again.plans).toEqual(config.plans);
    expect(again.port).toBe(0);
  });
});

// The decide call's argument layout is written once in TypeScript (src/store/decide-calls.ts, which the call
// builder writes through) and once in Lua (lua/includes/read_rule.lua, which every decide path reads through):
// a call built in TypeScript is read back by each decide path of a real redis-server value for value (limit,
// period, burst, cost, skew, lease ttl and id, shadow, the clock), through EVALSHA, FCALL and the batch.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LUA_DIR } from '../../src/paths.ts';
import { withScripts } from '../../src/store/commands.ts';
import { decideCaller } from '../../src/store/decide-caller.ts';
import {
  DECIDE_ARGV,
  DECIDE_RULE_ARGV,
  DECIDE_RULE_WIDTH,
  DECIDE_RULES_AFTER,
  decideCall,
  decideShardKeys,
  parseDecideReply,
  type DecideRuleArgs,
} from '../../src/store/decide-calls.ts';
import type { DecideScriptName } from '../../src/store/library.ts';
import { bellKey, fastSetKey, keyLayout, peerPendingKey, shardMarkerKey } from '../../src/keys.ts';
import { bellLanes } from '../../src/federation/gossip/bells.ts';
import { client, useRedis } from '../harness/redis.ts';

/** The decide family's Lua files other than read_rule.lua. */
const DECIDE_FILES = [
  'decide.lua',
  'decide_single.lua',
  'functions/decide.lua',
  'functions/decide_single.lua',
  'includes/decide.lua',
  'includes/decide_single.lua',
  'includes/decide_batch.lua',
  'includes/decide_single_batch.lua',
  'includes/batch.lua',
];

describe('the decide argument layout', () => {
  it('is one table in TypeScript: a header, then rules of a fixed width', () => {
    expect(Math.max(...Object.values(DECIDE_ARGV))).toBe(DECIDE_RULES_AFTER);
    expect(Object.values(DECIDE_ARGV).sort((a, b) => a - b)).toEqual(Array.from({ length: DECIDE_RULES_AFTER }, (_, i) => i + 1));
    expect(Object.values(DECIDE_RULE_ARGV).sort((a, b) => a - b)).toEqual(Array.from({ length: DECIDE_RULE_WIDTH }, (_, i) => i + 1));
  });

  it('is read in Lua by read_rule.lua alone', () => {
    for (const file of DECIDE_FILES) {
      // The code, without its comments (the headers document the layout).
      const source = readFileSync(join(LUA_DIR, file), 'utf8')
        .replace(/--\[\[[\s\S]*?\]\]/g, '')
        .replace(/--.*$/gm, '');
      // No position of a call's ARGV outside read_rule.lua (a batch reads only its own layout: the call count,
      // then each call's key and argument counts at args[a + 1] and args[a + 2]).
      expect(source, file).not.toMatch(/\b(ARGV|argv|call_args)\[\d/);
      expect(source, file).not.toMatch(/\bargs\[a \+ ([3-9]|\d\d)/);
    }
  });

  describe('against a real redis-server', async () => {
    const server = await useRedis();
    const redis = withScripts(client(server.url));
    const now = 1_800_000_012_345;
    const skew = 1_234;
    const FW: DecideRuleArgs = { head: ['fw', 7, 60_000, 7], budget: -1, leaseTtl: 30_000, shadow: 0 };
    const TB: DecideRuleArgs = { head: ['tb', 10, 10_000, 4], budget: -1, leaseTtl: 30_000, shadow: 0 };
    const CC: DecideRuleArgs = { head: ['cc', 5, 60_000, 5], budget: -1, leaseTtl: 45_000, shadow: 0 };
    const SHADOW: DecideRuleArgs = { head: ['fw', 1, 60_000, 1], budget: -1, leaseTtl: 30_000, shadow: 1 };
    const call = (rules: DecideRuleArgs[], tag: string) =>
      decideCall({
        fixedKeys: ['qf:{s1}:m'],
        ruleKeys: rules.map((rule, i) => `qf:{s1}:${rule.head[0]}:${tag}:${i}`),
        rules,
        topology: { selfIndex: 0, unitsCsv: '1000000', maxClockSkewMs: skew, horizonMs: 600 },
        regions: 1,
        cost: 2,
        leaseId: `lease-${tag}`,
        now,
      });
    const paths: [string, (rules: DecideRuleArgs[], tag: string) => Promise<unknown>][] = [];
    for (const script of ['decide', 'decideSingleRegion'] as DecideScriptName[]) {
      const caller = decideCaller(redis, { script });
      paths.push([`${script} (EVALSHA)`, (rules, tag) => redis[script](...(call(rules, tag) as [number, ...(string | number)[]]))]);
      paths.push([`${script} (FCALL)`, (rules, tag) => caller(call(rules, tag))]);
      paths.push([`${script} (batch)`, async (rules, tag) => (await caller.batch([call(rules, tag)]))[0]]);
    }

    for (const [name, decide] of paths) {
      it(`${name} reads every value of the call where the builder put it`, async () => {
        const tag = name.replace(/\W+/g, '-');
        const rules = [FW, TB, CC, SHADOW];
        const reply = parseDecideReply(await decide(rules, tag), rules.length);
        expect(reply.now).toBe(now);
        // The shadow rule denies (cost 2 > limit 1) without blocking the others.
        expect(reply.allAllowed).toBe(true);
        const [fw, tb, cc, shadow] = reply.rules;
        expect(fw).toMatchObject({ allowed: true, remaining: 5, resetAtMs: (Math.floor(now / 60_000) + 1) * 60_000 });
        expect(tb).toMatchObject({ allowed: true, remaining: 2 });
        expect(cc).toMatchObject({ allowed: true, remaining: 3 });
        expect(shadow!.allowed).toBe(false);
        // The reply's last value per rule: one region is exact, the federation's remaining quota is its remaining.
        for (const rule of reply.rules) expect(rule.quotaRemaining).toBe(rule.remaining);
        // The window's expiry takes the skew; the leases their ttl and id.
        const ttl = await redis.pttl(`qf:{s1}:fw:${tag}:0`);
        expect(ttl).toBeGreaterThan(2 * 60_000 + skew + 1000 - 5_000);
        expect(ttl).toBeLessThanOrEqual(2 * 60_000 + skew + 1000);
        expect(await redis.zrange(`qf:{s1}:cc:${tag}:2`, '0', '-1', 'WITHSCORES')).toEqual([
          `lease-${tag}#1`,
          String(now + 45_000),
          `lease-${tag}#2`,
          String(now + 45_000),
        ]);
        // One rule alone (decide_single.lua's one-rule path for a fixed window and a token bucket).
        const fwAlone = parseDecideReply(await decide([FW], `${tag}-fw`), 1);
        expect(fwAlone.rules[0]).toMatchObject({ allowed: true, remaining: 5 });
        expect(await redis.pttl(`qf:{s1}:fw:${tag}-fw:0`)).toBeGreaterThan(2 * 60_000 + skew + 1000 - 5_000);
        const tbAlone = parseDecideReply(await decide([TB], `${tag}-tb`), 1);
        expect(tbAlone).toMatchObject({ allAllowed: true, now, rules: [{ allowed: true, remaining: 2 }] });
        expect([fwAlone.rules[0]!.quotaRemaining, tbAlone.rules[0]!.quotaRemaining]).toEqual([5, 2]);
        const shadowAlone = parseDecideReply(await decide([SHADOW], `${tag}-shadow`), 1);
        expect(shadowAlone).toMatchObject({ allAllowed: true, rules: [{ allowed: false, remaining: 1 }] });
        expect(shadowAlone.rules[0]!.quotaRemaining).toBe(1);
      });
    }

    it("a federated call's shard keys are decide.lua's: marker, pending sets, fast-lane set, bell, then the rules", async () => {
      expect(decideShardKeys(keyLayout(), 5)).toEqual([shardMarkerKey(5)]);
      const keys = decideShardKeys(keyLayout(), 5, [0, 2]);
      expect(keys).toEqual([shardMarkerKey(5), peerPendingKey(5, 0), peerPendingKey(5, 2), fastSetKey(5), bellKey(5)]);
      const federated = (tag: string) =>
        decideCall({
          fixedKeys: keys,
          ruleKeys: [`qf:{s5}:fw:${tag}`],
          rules: [FW],
          topology: { selfIndex: 1, unitsCsv: '333333,333334,333333', maxClockSkewMs: skew, horizonMs: 600 },
          regions: 3,
          cost: 1,
          leaseId: `lease-${tag}`,
          now,
        });
      const caller = decideCaller(redis, { script: 'decide' });
      // An intact shard (no data loss to fence).
      await redis.hset(shardMarkerKey(5), 'fence', 0);
      for (const [i, decide] of [
        (c: (string | number)[]) => redis.decide(...(c as [number, ...(string | number)[]])),
        (c: (string | number)[]) => caller(c),
        async (c: (string | number)[]) => (await caller.batch([c, c]))[0],
      ].entries()) {
        await redis.del(bellKey(5), fastSetKey(5));
        const tag = `federated-${i}`;
        const reply = parseDecideReply(await decide(federated(tag)), 1);
        expect(reply.allAllowed).toBe(true);
        // The first admission went on the fast lane and to both peers' pending sets, and rang the bell once.
        expect(await redis.sismember(fastSetKey(5), `qf:{s5}:fw:${tag}`)).toBe(1);
        expect(await redis.zscore(peerPendingKey(5, 0), `qf:{s5}:fw:${tag}`)).not.toBeNull();
        expect(await redis.zscore(peerPendingKey(5, 2), `qf:{s5}:fw:${tag}`)).not.toBeNull();
        expect(await redis.llen(bellKey(5))).toBe(1);
        // The bell names the lanes the call gave work to (lua/includes/bell.lua): the fast lane (bit 0) and the
        // rounds to peers 0 and 2 (bits 2 and 4), what bells.ts marks dirty.
        expect(await redis.lrange(bellKey(5), 0, -1)).toEqual(['L21']);
        expect(bellLanes('L21')).toEqual(['fast', 0, 2]);
        // A bell already rung keeps its one element.
        await decide(federated(tag));
        expect(await redis.llen(bellKey(5))).toBe(1);
        // One that names every lane (the resync's ring, an older version's) stays as it is.
        await redis.del(bellKey(5));
        await redis.rpush(bellKey(5), '1');
        await decide(federated(`${tag}-again`));
        expect(await redis.lrange(bellKey(5), 0, -1)).toEqual(['1']);
      }
    });
  });
});

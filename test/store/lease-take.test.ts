// A local lease's take (lua/includes/local_lease.lua) is two decisions back to back: a decide call that asks for
// a lease answers and writes exactly what a call of the request's cost followed by a call of the units it took
// would. The protocol's properties and the differential test cover any sequence of decisions, so they cover the
// take too. Checked here on twin keys of a real redis-server, for every algorithm that leases, single-region and
// federated (three regions), through FCALL, over random schedules of costs, asks and clock steps.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { Rule } from '../../src/config/schema.ts';
import { markShardsIntact } from '../../src/federation/recovery.ts';
import { keyLayout } from '../../src/keys.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { withScripts } from '../../src/store/commands.ts';
import { decideCaller } from '../../src/store/decide-caller.ts';
import { decideCall, decideRuleArgs, decideShardKeys, parseDecideReply } from '../../src/store/decide-calls.ts';
import { stateFields } from '../support/state-key.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = withScripts(client(server.url));
await markShardsIntact(redis);

const PERIOD = 10_000;
const SHARD = 3;
const layout = keyLayout();

const step = fc.record({
  advance: fc.integer({ min: 0, max: PERIOD / 4 }),
  cost: fc.integer({ min: 1, max: 3 }),
  ask: fc.integer({ min: 0, max: 12 }),
});

let run = 0;

for (const regions of [1, 3] as const) {
  for (const algorithm of ['fixedWindow', 'slidingWindow', 'tokenBucket'] as const) {
    describe(`a lease take, ${regions === 1 ? 'one region' : 'three regions'}, ${algorithm}`, () => {
      const config = parseConfig({
        region: 'us-east',
        ...(regions === 3
          ? {
              federation: {
                leakageBudget: 4,
                peers: [
                  { name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' },
                  { name: 'ap-south', redisUrl: 'redis://127.0.0.1:2' },
                ],
              },
            }
          : {}),
        rules: [{ name: 'r', by: ['apiKey'], algorithm, limit: 40, period: PERIOD, burst: 30 }],
      });
      const rule: Rule = config.rules[0]!;
      const topology = topologyOf(config);
      const args = decideRuleArgs(rule, config.federation.leakageBudget, regions);
      const fixedKeys = decideShardKeys(layout, SHARD, regions > 1 ? topology.peerIndexes : undefined);
      const caller = decideCaller(redis, { script: regions > 1 ? 'decide' : 'decideSingleRegion' });
      const decide = async (key: string, cost: number, ask: number, now: number) =>
        parseDecideReply(
          await caller(
            decideCall({ fixedKeys, ruleKeys: [key], rules: [args], topology, regions, cost, leaseId: '', leaseAsks: [ask], now }),
          ),
          1,
        );
      // Every field but the key's write version (one call writes once, two calls twice); a single region's bucket as
      // its one number.
      const state = async (key: string) => {
        const { v: _version, ...fields } = await stateFields(redis, key);
        return fields;
      };

      it('answers and writes what a decision of the cost, then one of the units taken, would', async () => {
        let leasedSome = 0;
        await fc.assert(
          fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 40 }), async (steps) => {
            run++;
            const leased = layout.stateKey(SHARD, 'r', `lease-${run}`);
            const twin = layout.stateKey(SHARD, 'r', `twin-${run}`);
            let now = 1_900_000_000_000 + run * 7 * PERIOD;
            for (const { advance, cost, ask } of steps) {
              now += advance;
              const withAsk = await decide(leased, cost, ask, now);
              const first = await decide(twin, cost, 0, now);
              let taken = 0;
              if (first.allAllowed && ask > 0) {
                const take = Math.min(ask, Math.floor(first.rules[0]!.remaining));
                if (take > 0 && (await decide(twin, take, 0, now)).allAllowed) taken = take;
              }
              const { leased: units, ...answer } = withAsk.rules[0]!;
              const { leased: none, ...expected } = first.rules[0]!;
              expect(none).toBe(0);
              expect(answer).toEqual(expected);
              expect(withAsk.allAllowed).toBe(first.allAllowed);
              expect(units).toBe(taken);
              expect(await state(leased)).toEqual(await state(twin));
              if (units > 0) leasedSome++;
            }
          }),
          { numRuns: 12 },
        );
        // The schedules did take leases (not only asks that found nothing left).
        expect(leasedSome).toBeGreaterThan(10);
      });
    });
  }
}

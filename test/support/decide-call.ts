// A decide call as region 0 of three equal regions sends it (decideCall, one rule, cost 1), for tests that run the
// federated decide library on a real redis-server.
import { keyLayout, shardOf } from '../../src/keys.ts';
import { decideCall, decideShardKeys, type DecideRuleArgs } from '../../src/store/decide-calls.ts';

const layout = keyLayout();

/** One rule of a federated decide call: its name (the state key's) and its head and budget as decideRuleArgs gives. */
export interface FederatedTestRule {
  name: string;
  head: DecideRuleArgs['head'];
  budget: number;
}

/**
 * The call's numkeys, KEYS and ARGV for `key` under `rule` at the pinned clock `now`, region 0 of three; with `lease`,
 * a local lease ask of that many units beyond the cost.
 */
export function federatedDecideCall(key: string, rule: FederatedTestRule, now: number, lease = 0): (string | number)[] {
  const shard = shardOf(key);
  return decideCall({
    fixedKeys: decideShardKeys(layout, shard, [1, 2]),
    ruleKeys: [layout.stateKey(shard, rule.name, key)],
    rules: [{ head: rule.head, budget: rule.budget, leaseTtl: 30_000, shadow: 0 }],
    topology: { selfIndex: 0, unitsCsv: '333333,333333,333333', maxClockSkewMs: 1000, horizonMs: 10_000 },
    regions: 3,
    cost: 1,
    leaseId: lease > 0 ? 'lease-1' : '',
    leaseAsks: [lease],
    now,
  });
}

// Lua time per decide call inside one EVAL (no network, no client), fresh keys, token bucket: the general decide
// path for one region ("solo") beside a federated region's silent keys ("fed"), the minimum over REPS runs.
// `npx tsx bench/lua-time.ts [decisions]`; PATCH='from=>to;;from2=>to2' replaces source text first (to see what a
// part of the script costs by stubbing it). Run on a quiet machine: it measures wall time inside Redis.
import { Redis } from 'ioredis';
import { keyLayout } from '../src/keys.ts';
import { decideCall, decideShardKeys } from '../src/store/decide-calls.ts';
import { scriptSource } from '../src/store/lua-source.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { patchedSource } from './lib/lua-patch.ts';
const server = await startRedis({});
const redis = new Redis(server.url);
const src = patchedSource(scriptSource('includes/decide'), process.env.PATCH);
const n = Number(process.argv[2] ?? 2000);
const layout = keyLayout();
const rule = { head: ['tb', 1000, 60000, 1000] as const, budget: 50, leaseTtl: 30000, shadow: 0 as const };
/** decide's KEYS and ARGV as the service lays them out (decideCall), for a region of `regions`. */
function callOf(regions: number): { keys: string[]; argv: string[] } {
  const call = decideCall({
    fixedKeys: decideShardKeys(layout, 46, regions === 1 ? undefined : [1, 2]),
    ruleKeys: [layout.stateKey(46, 'per-key', 'K')],
    rules: [rule],
    topology: {
      selfIndex: 0,
      unitsCsv: regions === 1 ? '1000000' : '333333,333333,333333',
      maxClockSkewMs: 1000,
      horizonMs: 10000,
    },
    regions,
    cost: 1,
    leaseId: '',
    now: '',
  }).map(String);
  const numKeys = Number(call[0]);
  return { keys: call.slice(1, 1 + numKeys), argv: call.slice(1 + numKeys) };
}
const fed = callOf(3);
const solo = callOf(1);
const loop = `
${src}
local n = tonumber(ARGV[1])
local keys = {}
for i = 2, #KEYS do keys[i - 1] = KEYS[i] end
local argv = {}
for i = 2, #ARGV do argv[i - 1] = ARGV[i] end
local last = #keys
local base = keys[last]
local t0 = redis.call('TIME')
for i = 1, n do
  keys[last] = base .. i
  renew_memos()
  decide(keys, argv)
end
local t1 = redis.call('TIME')
return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])
`;
await redis.hset(layout.shardMarkerKey(46), 'fence', 0);
const best: Record<string, number> = {};
for (let rep = 0; rep < Number(process.env.REPS ?? 5); rep++) {
  for (const [name, keys, argv] of [
    ['solo', solo.keys, solo.argv],
    ['fed', fed.keys, fed.argv],
  ] as const) {
    await redis.flushdb();
    await redis.hset(layout.shardMarkerKey(46), 'fence', 0);
    const us = Number(await redis.eval(loop, keys.length + 1, 'x', ...keys, String(n), ...argv)) / n;
    best[name] = Math.min(best[name] ?? Infinity, us);
  }
}
console.log('min us per decide', JSON.stringify(Object.fromEntries(Object.entries(best).map(([k, v]) => [k, v.toFixed(1)]))));
await redis.quit();
await server.stop();

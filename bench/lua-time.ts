// Lua time per decide call inside one EVAL (no network, no client), token bucket: fresh keys for one region
// ("solo") beside a federated region's silent keys ("fed": new; "again": each decided once before), and a federated
// region's loud keys ("loud": each key decided once, then given the grants and returns a hot key of a Zipf run holds,
// so the general path decides it); "hot"/"hotsolo": one key again and again; "hotloud": one key holding both donors'
// grants. The minimum over REPS runs.
// `npx tsx bench/lua-time.ts [decisions]`; PATCH='from=>to;;from2=>to2' replaces source text first (to see what a
// part of the script costs by stubbing it); MODES='loud,fed' runs only those modes. Run on a quiet machine: it measures
// wall time inside Redis.
import { Redis } from 'ioredis';
import { keyLayout } from '../src/keys.ts';
import { decideCall, decideShardKeys } from '../src/store/decide-calls.ts';
import { scriptSource } from '../src/store/lua-source.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { patchedSource } from './lib/lua-patch.ts';
// PATCH applied before anything starts: a `from` the source does not hold stops the bench without a redis-server left behind.
const src = patchedSource(scriptSource('includes/decide'), process.env.PATCH);
const server = await startRedis({});
const redis = new Redis(server.url);
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
for i = 3, #ARGV do argv[i - 2] = ARGV[i] end
local last = #keys
local base = keys[last]
local loud = ARGV[2] == 'loud'
if ARGV[2] == 'hotloud' then
  -- A hot key as a Zipf run leaves it: both peers granted their share to this region (x and a cells), which
  -- spends them; the timed loop decides this one key again and again.
  local k = label(slot_index(math.floor(now_ms(nil) / 60000)))
  keys[last] = base .. 1
  renew_memos()
  decide(keys, argv)
  silent_string_to_hash(keys[last])
  local s = k .. '.'
  redis.call('HSET', keys[last], 'x' .. s .. '2.0', '333333', 'a' .. s .. '2.0', '333.33300000000003',
    'x' .. s .. '1.0', '333333', 'a' .. s .. '1.0', '333.33300000000003', 'v', '3')
  redis.call('HDEL', keys[last], 'z')
  base = keys[last]
end
if ARGV[2] == 'again' then
  -- Each key decided once before the timed loop: it holds this region's silent string, as most keys of a Zipf run do.
  for i = 1, n do
    keys[last] = base .. i
    renew_memos()
    decide(keys, argv)
  end
end
if loud then
  -- A peer's count in this epoch's slot (and no z): the key is loud, the general path reads it.
  local k = label(slot_index(math.floor(now_ms(nil) / 60000)))
  for i = 1, n do
    keys[last] = base .. i
    renew_memos()
    decide(keys, argv)
    silent_string_to_hash(keys[last])
    -- As a Zipf run leaves a hot key: both peers granted their share, this region returned it (x and a cells).
    local s = k .. '.'
    redis.call('HSET', keys[last], 'c' .. s .. '0', '200', 'x' .. s .. '1.0', '333333', 'x' .. s .. '2.0', '333333',
      'x' .. s .. '0.1', '333333', 'x' .. s .. '0.2', '333333', 'a' .. s .. '1.0', '333.33300000000003',
      'a' .. s .. '2.0', '333.33300000000003', 'a' .. s .. '0.1', '295.72558419999979', 'a' .. s .. '0.2',
      '295.72558419999979', 'v', '121')
    redis.call('HDEL', keys[last], 'z')
  end
end
local hot = ARGV[2]:sub(1, 3) == 'hot'
local hotloud = ARGV[2] == 'hotloud'
local t0 = redis.call('TIME')
for i = 1, n do
  keys[last] = hot and base or base .. i
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
    ['loud', fed.keys, fed.argv],
    ['hot', fed.keys, fed.argv],
    ['hotsolo', solo.keys, solo.argv],
    ['hotloud', fed.keys, fed.argv],
    ['again', fed.keys, fed.argv],
  ] as const) {
    if (process.env.MODES && !process.env.MODES.split(',').includes(name)) continue;
    await redis.flushdb();
    await redis.hset(layout.shardMarkerKey(46), 'fence', 0);
    const us = Number(await redis.eval(loop, keys.length + 1, 'x', ...keys, String(n), name, ...argv)) / n;
    best[name] = Math.min(best[name] ?? Infinity, us);
  }
}
console.log('min us per decide', JSON.stringify(Object.fromEntries(Object.entries(best).map(([k, v]) => [k, v.toFixed(1)]))));
await redis.quit();
await server.stop();

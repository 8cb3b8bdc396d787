// Lua time per decide call inside one EVAL (no network, no client), fresh keys, token bucket: the general decide
// path for one region ("solo") beside a federated region's silent keys ("fed"), the minimum over REPS runs.
// `npx tsx bench/lua-time.ts [decisions]`; PATCH='from=>to;;from2=>to2' replaces source text first (to see what a
// part of the script costs by stubbing it). Run on a quiet machine: it measures wall time inside Redis.
import { Redis } from 'ioredis';
import { scriptSource } from '../src/store/lua-source.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { patchedSource } from './lib/lua-patch.ts';
const server = await startRedis({});
const redis = new Redis(server.url);
const src = patchedSource(scriptSource('includes/decide'), process.env.PATCH);
const n = Number(process.argv[2] ?? 2000);
const fedKeys = ['qf:{s46}:m', 'qf:{s46}:p:1', 'qf:{s46}:p:2', 'qf:{s46}:f', 'qf:{s46}:b', 'qf:{s46}:tb:K'];
const fedArgv = ['0', '3', '333333,333333,333333', '1000', '1', '', 'tb', '1000', '60000', '1000', '1', '50', '30000', '', '0', '10000'];
const soloKeys = ['qf:{s46}:m', 'qf:{s46}:tb:K'];
const soloArgv = ['0', '1', '1000000', '1000', '1', '', 'tb', '1000', '60000', '1000', '1', '50', '30000', '', '0', '10000'];
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
await redis.hset('qf:{s46}:m', 'fence', 0);
const best: Record<string, number> = {};
for (let rep = 0; rep < Number(process.env.REPS ?? 5); rep++) {
  for (const [name, keys, argv] of [
    ['solo', soloKeys, soloArgv],
    ['fed', fedKeys, fedArgv],
  ] as const) {
    await redis.flushdb();
    await redis.hset('qf:{s46}:m', 'fence', 0);
    const us = Number(await redis.eval(loop, keys.length + 1, 'x', ...keys, String(n), ...argv)) / n;
    best[name] = Math.min(best[name] ?? Infinity, us);
  }
}
console.log('min us per decide', JSON.stringify(Object.fromEntries(Object.entries(best).map(([k, v]) => [k, v.toFixed(1)]))));
await redis.quit();
await server.stop();

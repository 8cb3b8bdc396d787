// Redis CPU per decision of the decide scripts' Lua alone, without the batch or the call: one EVAL decides COUNT
// keys in a loop (the federated library's decide_prepared for a three-region token bucket, its silent keys; beside it
// the single-region library's single_token_bucket), timed by INFO commandstats (usec per EVAL ÷ COUNT). Steadier
// than bench/lua-batch-time.ts (one script call of about 100 ms instead of thousands of short ones), so a part's
// cost reads to a few tenths of a microsecond: PATCH='from=>to;;…' (bench/lib/lua-patch.ts) replaces text of the
// federated source first. `[COUNT=20000] [POOL=20000] [PASSES=2] [REPS=3] [PATCH=…] npx tsx bench/lua-loop-time.ts`:
// PASSES=1 decides fresh keys; with 2 the second pass, the one timed, decides the first pass's keys again (a silent
// key's string read and parsed; a single region's key lives only until its bucket is full again, so its second pass
// finds few). Every key is decided at one clock. Run on a quiet machine; compare the two columns
// of one run. docs/performance.md, twenty-ninth pass.
import { Redis } from 'ioredis';
import { keyLayout, shardOf } from '../src/keys.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { decideCall, decideShardKeys } from '../src/store/decide-calls.ts';
import { scriptSource } from '../src/store/lua-source.ts';
import { patchedSource } from './lib/lua-patch.ts';

const wholeNumber = (name: string, fallback: number, min: number): number => {
  const value = Number(process.env[name] ?? fallback);
  if (!(Number.isInteger(value) && value >= min))
    throw new Error(`${name} must be a whole number of at least ${min}, got ${process.env[name]}`);
  return value;
};
const count = wholeNumber('COUNT', 20_000, 1);
const pool = wholeNumber('POOL', 20_000, 1);
const passes = wholeNumber('PASSES', 2, 1);
const reps = wholeNumber('REPS', 3, 1);
// The loops replace each script's last line, `return decide(KEYS, ARGV)`: the key is the rule's KEYS plus a number.
const clock = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;
const federatedLoop = `local call = prepare_call(ARGV)
call.fences = {}
local base = KEYS[#KEYS]
${clock}
for i = 1, ${count} do
  KEYS[#KEYS] = base .. (i % ${pool})
  decide_prepared(call, KEYS, now)
end
return 1`;
const singleLoop = `local _, _, now_override = read_call(ARGV, 0)
local _, limit, period, burst, cost, skew, shadow = read_first_rule(ARGV, 0)
local base = KEYS[2]
${clock}
for i = 1, ${count} do
  single_token_bucket(base .. (i % ${pool}), limit, period, burst, cost, skew, shadow, now)
end
return 1`;
const LAST = 'return decide(KEYS, ARGV)';
const loop = (source: string, body: string): string => {
  if (!source.includes(LAST)) throw new Error('a decide script no longer ends with its decide call');
  return source.replace(LAST, body);
};
// PATCH applied before anything starts: a `from` the source does not hold stops the bench before a redis-server starts.
const federated = loop(patchedSource(scriptSource('decide'), process.env.PATCH), federatedLoop);
const single = loop(scriptSource('decide_single'), singleLoop);

const server = await startRedis({});
const redis = new Redis(server.url);
const layout = keyLayout();
const rule = { head: ['tb', 1000, 60_000, 1000] as const, budget: 50, leaseTtl: 30_000, shadow: 0 as const };

/** Redis µs per decision of the last of `passes` loops of `source`, on an empty Redis. */
async function run(source: string, regions: number): Promise<number> {
  await redis.flushall();
  for (let s = 0; s < 64; s++) await redis.hset(layout.shardMarkerKey(s), 'fence', 0);
  const shard = shardOf('k-loop-');
  const call = decideCall({
    fixedKeys: decideShardKeys(layout, shard, regions === 1 ? undefined : [1, 2]),
    ruleKeys: [layout.stateKey(shard, 'per-key', 'k-loop-')],
    rules: [rule],
    topology: { selfIndex: 0, unitsCsv: regions === 1 ? '1000000' : '333333,333333,333333', maxClockSkewMs: 1000, horizonMs: 10_000 },
    regions,
    cost: 1,
    leaseId: '',
    now: '',
  });
  let micros = Number.NaN;
  for (let pass = 0; pass < passes; pass++) {
    await redis.config('RESETSTAT');
    await redis.eval(source, ...(call as [number, ...string[]]));
    const line = /cmdstat_eval:calls=(\d+),usec=(\d+)/.exec(String(await redis.info('commandstats')));
    if (line === null) throw new Error('no eval in INFO commandstats');
    micros = Number(line[2]) / count;
  }
  return micros;
}

try {
  const rows: string[] = [];
  for (let rep = 0; rep < reps; rep++) {
    const one = await run(single, 1);
    const three = await run(federated, 3);
    rows.push(`single-region ${one.toFixed(2)}, federated silent ${three.toFixed(2)} (${(three / one).toFixed(2)}x)`);
  }
  console.log(`Redis usec per decision, ${passes > 1 ? 'keys decided again' : 'fresh keys'} (${count} in one EVAL, ${reps} reps):`);
  for (const row of rows) console.log(`  ${row}`);
} finally {
  await redis.quit();
  await server.stop();
}

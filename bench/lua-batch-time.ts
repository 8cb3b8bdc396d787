// Redis CPU per decision of the decide libraries' batch function, as the service sends it (decideBatchArgs of
// 32 calls, fresh keys over 64 shards, the per-key token bucket 1,000/min): the single-region library beside a
// federated region's (three regions, silent keys), by INFO commandstats (usec per FCALL ÷ calls per batch).
// `npx tsx bench/lua-batch-time.ts [batches] [calls per batch] [tb|fw|sw]`; KEY_POOL=n draws the keys from n (each
// decided again: a silent key's string is read and parsed) instead of a fresh key per call; with LOUD=1 too, each
// pool key of the federated run starts as a loud hash (both peers granted their share and this region returned it,
// as bench/lua-time.ts's loud mode leaves it), so the loud path decides it; LOUD=held: both peers granted their share
// and this region holds it (a Zipf head key's steady state, the peers idle bystanders); PATCH='from=>to;;from2=>to2' replaces text of the
// federated library first (as bench/lua-time.ts does), to see what a part costs. Run on a quiet machine; compare
// the two rows of one run, not runs. Besides commandstats' usec (wall time: a preempted script counts its wait), the
// redis-server's own CPU time over each run (/proc/<pid>/stat, 10 ms ticks) per decision, which preemption leaves out.
// CALLGRIND=1: each run gets its own redis-server under valgrind's callgrind, collecting only inside FCALL
// (`--toggle-collect=fcallCommand`), and prints the instructions executed per decision instead: the same count on
// every run whatever else the machine does (a part's cost with PATCH to well under 1%, where the timings move by
// 20-50% from run to run on a shared machine). About 50 times slower: use a few hundred batches. Needs valgrind
// (`apt-get install valgrind`).
import { Redis } from 'ioredis';
import { keyLayout, shardOf } from '../src/keys.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { callgrindRedis } from './lib/callgrind.ts';
import { decideBatchArgs, decideCall, decideShardKeys, unpackBatchReply } from '../src/store/decide-calls.ts';
import { decideLibrary } from '../src/store/library.ts';
import { patchedSource } from './lib/lua-patch.ts';
import { processCpuMicros } from './lib/processes.ts';

const batches = Number(process.argv[2] ?? 2000);
const perBatch = Number(process.argv[3] ?? 32);
/** The rule's algorithm: tb (the per-key token bucket, default), fw or sw (a window of the same limit). */
const algorithm = (process.argv[4] ?? 'tb') as 'tb' | 'fw' | 'sw';
const keyPool = Number(process.env.KEY_POOL ?? 0);
if (!(Number.isInteger(keyPool) && keyPool >= 0)) throw new Error(`KEY_POOL must be a whole number of keys, got ${process.env.KEY_POOL}`);
// PATCH applied before anything starts: a `from` the source does not hold stops the bench without a redis-server left behind.
const federatedSource = patchedSource(decideLibrary('decide').source, process.env.PATCH);
// PATCH_SINGLE: the same for the single-region library.
const singleSource = patchedSource(decideLibrary('decideSingleRegion').source, process.env.PATCH_SINGLE);
const callgrind = process.env.CALLGRIND === '1';
const server = callgrind ? undefined : await startRedis({});
let redis = new Redis(server?.url ?? 'redis://127.0.0.1:1', { lazyConnect: true });
const layout = keyLayout();
/** LOUD=1 or LOUD=held: the pool keys start as loud hashes. */
const loud = process.env.LOUD === '1' || process.env.LOUD === 'held';
const rule = { head: [algorithm, 1000, 60000, 1000] as const, budget: 50, leaseTtl: 30000, shadow: 0 as const };

/** Each pool key as a loud token bucket's hash in this epoch's slot (the cells of bench/lua-time.ts's loud mode). */
async function loudKeys(name: string, pool: number): Promise<void> {
  // The run must stay in the keys' epoch: a minute's turn mid-run starts every key's slot anew (another path, and
  // counts that move with the hour of the run). With less than 30 s of the minute left, wait for the next one.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 30_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
  const now = Date.now();
  const epoch = Math.floor(now / 60_000);
  const s = `${epoch % 3}.`;
  const pipeline = redis.pipeline();
  for (let i = 0; i < pool; i++) {
    const key = `k-${name}-${i}`;
    const state = layout.stateKey(shardOf(key), 'per-key', key);
    pipeline.hset(state, {
      tokens: '300',
      last_refill: String(now),
      sig: '333333',
      [`w${epoch % 3}`]: String(epoch),
      [`c${s}0`]: '200',
      [`t${s}0`]: String(now),
      [`x${s}1.0`]: '333333',
      [`x${s}2.0`]: '333333',
      [`a${s}1.0`]: '333.33300000000003',
      [`a${s}2.0`]: '333.33300000000003',
      v: '121',
      // LOUD=1: this region returned both grants as well; LOUD=held: it holds them (both peers bystanders).
      ...(process.env.LOUD === 'held'
        ? {}
        : {
            [`x${s}0.1`]: '333333',
            [`x${s}0.2`]: '333333',
            [`a${s}0.1`]: '295.72558419999979',
            [`a${s}0.2`]: '295.72558419999979',
          }),
    });
    pipeline.pexpire(state, 600_000);
  }
  await pipeline.exec();
}

async function run(name: 'decide' | 'decideSingleRegion', regions: number): Promise<{ usec: number; cpuUs: number }> {
  const counted = callgrind ? await callgrindRedis() : undefined;
  if (counted) redis = new Redis(counted.url);
  await redis.flushall();
  await redis.call('FUNCTION', 'FLUSH');
  const lib = decideLibrary(name);
  await redis.call('FUNCTION', 'LOAD', name === 'decide' ? federatedSource : singleSource);
  const topology = {
    selfIndex: 0,
    unitsCsv: regions === 1 ? '1000000' : '333333,333333,333333',
    maxClockSkewMs: 1000,
    horizonMs: 10000,
  };
  for (let s = 0; s < 64; s++) await redis.hset(layout.shardMarkerKey(s), 'fence', 0);
  if (loud && regions > 1 && keyPool > 0) await loudKeys(name, keyPool);
  await redis.config('RESETSTAT');
  const cpuBefore = processCpuMicros(server?.pid) ?? Number.NaN;
  let n = 0;
  for (let b = 0; b < batches; b++) {
    const calls = [];
    for (let i = 0; i < perBatch; i++) {
      const key = `k-${name}-${keyPool > 0 ? n % keyPool : n}`;
      n++;
      const shard = shardOf(key);
      calls.push(
        decideCall({
          fixedKeys: decideShardKeys(layout, shard, regions === 1 ? undefined : [1, 2]),
          ruleKeys: [layout.stateKey(shard, 'per-key', key)],
          rules: [rule],
          topology,
          regions,
          cost: 1,
          leaseId: '',
          now: '',
        }),
      );
    }
    // A call that raised is no decision: a run that counted errors would read as a cheap one.
    const failed = unpackBatchReply(await redis.call('FCALL', lib.batchFn, ...decideBatchArgs(calls)), calls.length).find(
      (reply) => reply instanceof Error,
    );
    if (failed !== undefined) throw new Error(`${name}: a decide call failed: ${failed.message}`);
  }
  if (counted) {
    await redis.quit();
    // Instructions per decision, in the `usec` slot; no /proc figure under valgrind.
    return { usec: (await counted.stop()) / (batches * perBatch), cpuUs: Number.NaN };
  }
  const cpuUs = ((processCpuMicros(server?.pid) ?? Number.NaN) - cpuBefore) / (batches * perBatch);
  const stats = String(await redis.info('commandstats'));
  const line = /cmdstat_fcall:calls=(\d+),usec=(\d+)/.exec(stats);
  if (line === null) throw new Error('no fcall in INFO commandstats');
  return { usec: Number(line[2]) / (Number(line[1]) * perBatch), cpuUs };
}

/** What the federated row decides: loud hashes (LOUD=1 with a pool) or silent keys. */
const federatedKind = loud && keyPool > 0 ? `loud (${process.env.LOUD})` : 'silent';
const best = { single: Infinity, federated: Infinity, singleCpu: Infinity, federatedCpu: Infinity };
for (let rep = 0; rep < Number(process.env.REPS ?? 3); rep++) {
  const single = await run('decideSingleRegion', 1);
  const federated = await run('decide', 3);
  best.single = Math.min(best.single, single.usec);
  best.federated = Math.min(best.federated, federated.usec);
  best.singleCpu = Math.min(best.singleCpu, single.cpuUs);
  best.federatedCpu = Math.min(best.federatedCpu, federated.cpuUs);
}
if (callgrind) {
  console.log(
    `Instructions in FCALL per decision (batches of ${perBatch}, callgrind): single-region ${Math.round(best.single)}, federated ${federatedKind} ${Math.round(best.federated)} (${(best.federated / best.single).toFixed(2)}x)`,
  );
  process.exit(0);
}
console.log(
  `Redis usec per decision (batches of ${perBatch}): single-region ${best.single.toFixed(2)}, federated ${federatedKind} ${best.federated.toFixed(2)} (${(best.federated / best.single).toFixed(2)}x)`,
);
console.log(
  `redis-server CPU us per decision (whole process, /proc): single-region ${best.singleCpu.toFixed(2)}, federated ${federatedKind} ${best.federatedCpu.toFixed(2)} (${(best.federatedCpu / best.singleCpu).toFixed(2)}x)`,
);
await redis.quit();
await server?.stop();

// Redis CPU of one apply_gossip.lua call on a receiving peer, as the gossip worker makes it: K keys decided loud in
// a sending region (three regions, the per-key token bucket 1,000/min and a fixed window 1,000/min, one admission
// of cost 250 each, twice: past the region's share), their state read as the fast lane reads it, then applied on a
// second redis-server as region 1 (INFO commandstats: usec per EVALSHA or FCALL), one call per entry, a job's
// JOB_ENTRIES calls issued together as the gossip worker does. Each key is applied twice: the first merge
// changes the state (and may grant), the second is a duplicate that changes nothing. Per entry: apply calls, Redis
// µs, and this process's CPU µs (the client side of the calls).
// `npx tsx bench/apply-gossip-time.ts [keys]`; PATCH as in bench/lua-batch-time.ts. Compare rows of one run.
// CALLGRIND=1: each algorithm's receiver is a redis-server under callgrind (bench/lib/callgrind.ts) and the run prints
// the instructions the library's FCALLs execute per entry of the first merge instead (the same on every run).
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/load.ts';
import { createRedisEngine } from '../src/engine/redis-engine.ts';
import { decodeState, flattenSlot } from '../src/federation/gossip/cells.ts';
import { markShardsIntact } from '../src/federation/recovery.ts';
import { startRedis } from '../src/ops/redis-process.ts';
import { topologyOf } from '../src/protocol/index.ts';
import { luaSource, withScripts } from '../src/store/commands.ts';
import { gossipLibrary } from '../src/store/library.ts';
import { callgrindRedis } from './lib/callgrind.ts';
import { patchedSource } from './lib/lua-patch.ts';
import { applyGossipCall, parseApplyGossipReply, runApplyGossip, type GossipEntry } from '../src/store/gossip-calls.ts';
import { layoutOf } from '../src/keys.ts';
import { runScript } from '../src/store/script-call.ts';

const keys = Number(process.argv[2] ?? 500);
/** Entries per gossip job, their calls issued together (JOB_ENTRIES env; a Zipf run's jobs carry about 5). */
const JOB_ENTRIES = Number(process.env.JOB_ENTRIES ?? 8);

interface Row {
  /** Redis µs inside the apply commands, per entry. */
  usec: number;
  /** This process's CPU (building the calls, sending, parsing the replies), per entry. */
  clientUsec: number;
  /** Apply calls (EVALSHA or FCALL) per entry. */
  commands: number;
  granted: number;
}
// PATCH='from=>to;;…' replaces text of apply_gossip.lua and of its library first (bench/lib/lua-patch.ts); applied
// before anything starts, so a `from` the sources do not hold leaves no redis-server behind.
const patchedScript = process.env.PATCH ? patchedSource(luaSource('applyGossip'), process.env.PATCH) : undefined;
const patchedLibrary = process.env.PATCH ? patchedSource(gossipLibrary().source, process.env.PATCH) : undefined;
const callgrind = process.env.CALLGRIND === '1';
const [senderServer, receiverServer] = await Promise.all([startRedis({}), callgrind ? undefined : startRedis({})]);
const configFor = (region: string, algorithm: string, receiverUrl: string) =>
  parseConfig({
    region,
    redis: { url: region === 'a' ? senderServer.url : receiverUrl },
    federation: {
      peers: ['a', 'b', 'c'].filter((name) => name !== region).map((name) => ({ name, redisUrl: 'redis://127.0.0.1:1' })),
    },
    rules: [{ name: 'r', by: ['apiKey'], algorithm, limit: 1000, period: '1m' }],
  });

async function row(algorithm: string): Promise<string> {
  const counted = callgrind ? await callgrindRedis() : undefined;
  const receiverUrl = counted?.url ?? receiverServer!.url;
  const sender = withScripts(new Redis(senderServer.url));
  const receiverClient = new Redis(receiverUrl);
  if (patchedScript) receiverClient.defineCommand('applyGossip', { lua: patchedScript });
  const receiver = withScripts(receiverClient);
  await Promise.all([sender.flushall(), receiver.flushall()]);
  await Promise.all([markShardsIntact(sender), markShardsIntact(receiver)]);
  const senderConfig = configFor('a', algorithm, receiverUrl);
  const receiverConfig = configFor('b', algorithm, receiverUrl);
  const engine = createRedisEngine({ config: senderConfig, redis: sender, overLimitCache: false });
  const entries: GossipEntry[] = [];
  for (let i = 0; i < keys; i++) {
    // Two admissions of 250: past this region's share of 1,000 (a third), so the key is loud (a hash).
    for (let j = 0; j < 2; j++) await engine.decide({ apiKey: `key-${i}`, ip: '10.0.0.1', method: 'GET', path: '/', cost: 250 });
  }
  for (const key of await sender.keys('qf:{s*}:r:*')) {
    // A key still silent is a string (lua/includes/silent_string.lua): the fast lane sends nothing for it.
    if ((await sender.type(key)) !== 'hash') continue;
    const state = decodeState(await sender.hgetall(key), 3);
    if (state.slots.length > 0) entries.push({ k: key, t: state.changedAt, s: state.slots.map(flattenSlot) });
  }
  const topology = topologyOf(receiverConfig);
  const senderIndex = topologyOf(senderConfig).selfIndex;
  const rule = receiverConfig.rules[0]!;
  const cells = entries.reduce((sum, entry) => sum + entry.s.flat().length, 0) / entries.length;
  const measure = async (via: 'script' | 'function') => {
    await receiver.flushall();
    await receiver.call('FUNCTION', 'FLUSH');
    if (via === 'function' && patchedLibrary) await receiver.call('FUNCTION', 'LOAD', patchedLibrary);
    await markShardsIntact(receiver);
    const rows = [];
    for (let pass = 0; pass < (counted ? 1 : 2); pass++) {
      await receiver.config('RESETSTAT');
      let granted = 0;
      const cpu = process.cpuUsage();
      const calls = entries.map((entry) =>
        applyGossipCall(layoutOf(receiverConfig), topology, rule, receiverConfig.federation.leakageBudget, senderIndex, entry),
      );
      // One call per entry, a job's JOB_ENTRIES issued together (as the gossip worker does: pipelined).
      const one = (call: (typeof calls)[number]) =>
        via === 'function' ? runApplyGossip(receiver, call) : runScript(receiver, 'applyGossip', call).then(parseApplyGossipReply);
      for (let at = 0; at < calls.length; at += JOB_ENTRIES) {
        for (const reply of await Promise.all(calls.slice(at, at + JOB_ENTRIES).map(one))) if (reply.granted) granted++;
      }
      const spent = process.cpuUsage(cpu);
      const stats = String(await receiver.info('commandstats'));
      const line = /cmdstat_(?:evalsha|fcall):calls=(\d+),usec=(\d+)/.exec(stats);
      rows.push({
        usec: line ? Number(line[2]) / entries.length : Number.NaN,
        clientUsec: (spent.user + spent.system) / entries.length,
        commands: line ? Number(line[1]) / entries.length : Number.NaN,
        granted,
      });
    }
    return rows as [Row, Row];
  };
  const [firstFn, againFn] = await measure('function');
  if (counted) {
    await engine.close?.();
    sender.disconnect();
    receiver.disconnect();
    const instructions = (await counted.stop()) / entries.length;
    return `| ${algorithm} | FCALL (library), callgrind | ${entries.length} | ${cells.toFixed(0)} | ${Math.round(instructions)} instructions per entry (first merge) | ${firstFn.granted} |`;
  }
  const [first, again] = await measure('script');
  await engine.close?.();
  sender.disconnect();
  receiver.disconnect();
  const cellsOf = (via: string, a: Row, b: Row) =>
    `| ${algorithm} | ${via} | ${entries.length} | ${cells.toFixed(0)} | ${a.commands.toFixed(3)} | ${a.usec.toFixed(1)} | ${a.clientUsec.toFixed(1)} | ${a.granted} | ${b.usec.toFixed(1)} | ${b.clientUsec.toFixed(1)} |`;
  return [cellsOf('EVALSHA', first, again), cellsOf('FCALL (library)', firstFn, againFn)].join('\n');
}

console.log(
  '| algorithm | call | entries | apply calls per entry | Redis µs per entry (first) | client CPU µs per entry (first) | granted | Redis µs per entry (duplicate) | client CPU µs per entry (duplicate) |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const algorithm of ['tokenBucket', 'fixedWindow']) console.log(await row(algorithm));
await Promise.all([senderServer.stop(), receiverServer?.stop()]);

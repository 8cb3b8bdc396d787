// `[PROBE_START_SECOND=s] npx tsx bench/federation-probe.ts [seconds] [callers] [jobs]`: where a federated region's work goes under Zipf(1.0) load
// over 1 M keys, in one process (three real redis-servers and federations, test/support/federation.ts; the per-key
// token bucket of regions/*.yaml, 1,000/min, budget 5%, sync 100 ms, load on region a only). It prints:
//   - which keys ended loud (a hash: a peer wrote to it, or it ran past its watermark or its pace; still marked
//     silent, z, when no peer's cell is in it yet) and the share of the decisions they took, beside the silent ones
//     (one string), with their denials, how many of those the over-limit cache answered (on, as in the service) and
//     the false denials; then the loud keys by Zipf rank, with their request rate beside region a's share of the
//     limit: whether the keys that talk are the ones that need the federation;
//   - each region's Redis time per decision by command and script (every command in the SLOWLOG: slower than
//     without it, so compare the rows with each other, not with the bench);
//   - the commands each region's Redis received from clients for 2 s in the middle of the load (redis-cli MONITOR),
//     with the gossip jobs added there: a receiving region's cost per job;
//   - the gossip jobs and bytes each region sent each peer (PROBE_ROWS=n: n commands per Redis, 12 by default);
//   - with `jobs`: at three quarters of the load, each region's completed gossip jobs still kept (the last
//     GOSSIP_KEEP_COMPLETED) by link, and the first of them per peer link with their entries (key, cells rounded):
//     what the peers send each other.
// PROBE_RATE=r: the callers together offer r decisions a second (paced), as a region under that load would see
// them; unset, they decide as fast as they can. Used for docs/performance.md's tenth and twenty-seventh passes. Run
// alone on the machine: it loads both cores.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { readJob } from '../src/federation/gossip/message.ts';
import { GOSSIP_QUEUE } from '../src/federation/gossip/peer-link.ts';
import { layoutOf } from '../src/keys.ts';
import { SCRIPTS, luaSource, type ScriptName } from '../src/store/commands.ts';
import { startDemoFederation } from './lib/demo-federation.ts';
import { keyDraw } from './lib/key-draw.ts';
import { untilSecondOfMinute } from './lib/minute-start.ts';
import { renderTable, type Row } from './lib/table.ts';

const seconds = Number(process.argv[2] ?? 8);
const callers = Number(process.argv[3] ?? 32);
// PROBE_RATE, read before anything starts.
const offered = Number(process.env.PROBE_RATE ?? 0);
if (!(offered >= 0)) throw new Error(`PROBE_RATE must be a number of decisions a second, got ${process.env.PROBE_RATE}`);
const fed = await startDemoFederation({ maxWaitMs: 500 });
const a = fed.region('a');
const draw = keyDraw({ distribution: 'zipf', keys: 1_000_000 });
// PROBE_START_SECOND=s: the load starts at second s of a minute, so runs compare at the same point of the token
// bucket's epoch (a minute: at its start every loud key draws its grants again).
await untilSecondOfMinute(process.env.PROBE_START_SECOND);

for (const region of fed.regions) {
  await region.redis.config('SET', 'slowlog-log-slower-than', '0');
  await region.redis.config('SET', 'slowlog-max-len', '1000000');
  await region.redis.slowlog('RESET');
}

// Halfway through the load: every client command each Redis receives for 2 s.
const monitorFile = (name: string) => `/tmp/quotafed-probe-monitor-${process.pid}-${name}.txt`;
const monitors: Promise<void>[] = [];
setTimeout(
  () => {
    for (const region of fed.regions) {
      const child = spawn('bash', ['-c', `timeout 2 redis-cli -p ${region.server.port} monitor > ${monitorFile(region.name)}`]);
      monitors.push(new Promise((resolve) => child.on('exit', () => resolve())));
    }
  },
  (seconds * 1000) / 2,
);

const perKey = new Map<number, { n: number; denied: number; cached: number; falseDenied: number }>();
// With `jobs`: the last completed gossip jobs of each region, read at three quarters of the load.
const jobDumps: Promise<void>[] = [];
if (process.argv[4] === 'jobs') {
  setTimeout(() => jobDumps.push(printRecentJobs()), seconds * 750);
}
async function printRecentJobs(): Promise<void> {
  for (const region of fed.regions) {
    const queue = `${layoutOf(region.config).gossipQueuePrefix}:${GOSSIP_QUEUE}`;
    const ids = await region.redis.zrevrange(`${queue}:completed`, 0, -1);
    const tally = new Map<string, { jobs: number; entries: number }>();
    const shown: string[] = [];
    for (const id of ids) {
      const data = await region.redis.hget(`${queue}:${id}`, 'data');
      if (!data) continue;
      const message = readJob(JSON.parse(data), fed.regions.length);
      const link = `${message.from} → ${message.to} ${message.kind}`;
      const row = tally.get(link) ?? { jobs: 0, entries: 0 };
      row.jobs++;
      row.entries += message.entries.length;
      tally.set(link, row);
      if (row.jobs <= 4 && message.from !== 'a') {
        const entries = message.entries.map((entry) => ({ k: entry.k.slice(-6), s: entry.s.map((slot) => slot.map(Math.round)) }));
        shown.push(`${link} seq ${message.seq}: ${JSON.stringify(entries).slice(0, 600)}`);
      }
    }
    console.log(`\n### Region ${region.name}: its last ${ids.length} completed gossip jobs\n`);
    for (const [link, row] of tally) console.log(`${link}: ${row.jobs} jobs, ${row.entries} entries`);
    for (const line of shown) console.log(line);
  }
}

let decisions = 0;
const start = Date.now();
const end = start + seconds * 1000;
let issued = 0;
await Promise.all(
  Array.from({ length: callers }, async () => {
    while (Date.now() < end) {
      if (offered > 0) {
        // The next decision's slot in an even schedule of `offered` a second, shared by the callers.
        const wait = start + (issued++ / offered) * 1000 - Date.now();
        if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      }
      const rank = draw();
      const decision = await a.engine.decide({ apiKey: `key-${rank}`, ip: '', method: 'POST', path: '/' });
      decisions++;
      const tally = perKey.get(rank) ?? { n: 0, denied: 0, cached: 0, falseDenied: 0 };
      tally.n++;
      if (!decision.allowed) tally.denied++;
      const outcome = decision.outcomes[0];
      if (outcome?.source === 'cache') tally.cached++;
      if (outcome?.falseDenial) tally.falseDenied++;
      perKey.set(rank, tally);
    }
  }),
);
await Promise.all(monitors);
await Promise.all(jobDumps);
// Each Redis's SLOWLOG, read before the key census below adds its own commands.
const slowlogs = new Map<string, [number, number, number, string[]][]>();
for (const region of fed.regions) {
  slowlogs.set(region.name, (await region.redis.slowlog('GET', 1_000_000)) as [number, number, number, string[]][]);
  await region.redis.config('SET', 'slowlog-log-slower-than', '10000');
}

// Loud (a hash) or silent (a string), by the type of each key's state.
const layout = layoutOf(a.config);
const byType = new Map<string, { keys: number; decisions: number; denied: number; cached: number; falseDenied: number }>();
// The loud keys by rank (0 the most frequent): [rank, decisions, denied].
const loudRanks: [number, number, number][] = [];
for (const [rank, tally] of perKey) {
  const key = layout.ruleKey('per-key', { principal: `key-${rank}`, dimensions: [`key-${rank}`] });
  let type = await a.redis.type(key);
  // A hash still marked silent (z): it turned loud by its own admissions, no peer's cell merged into it yet.
  if (type === 'hash' && (await a.redis.hexists(key, 'z')) === 1) type = 'hash-z';
  const row = byType.get(type) ?? { keys: 0, decisions: 0, denied: 0, cached: 0, falseDenied: 0 };
  row.keys++;
  row.decisions += tally.n;
  row.denied += tally.denied;
  row.cached += tally.cached;
  row.falseDenied += tally.falseDenied;
  byType.set(type, row);
  if (type !== 'string') loudRanks.push([rank, tally.n, tally.denied]);
}
console.log(
  renderTable({
    id: 'probe-keys',
    title: `Keys of region a after ${decisions.toLocaleString('en-US')} decisions (${Math.round(decisions / seconds)}/s, ${callers} callers)`,
    columns: ['state', 'keys', 'decisions', 'share of decisions', 'denied', 'of which from the cache', 'false denials'],
    rows: [...byType].map(([type, row]) => ({
      state:
        type === 'hash'
          ? 'loud (hash)'
          : type === 'hash-z'
            ? 'loud (hash still marked silent: no peer cell yet)'
            : type === 'string'
              ? 'silent (string)'
              : type,
      keys: row.keys,
      decisions: row.decisions,
      'share of decisions': `${((100 * row.decisions) / decisions).toFixed(1)}%`,
      denied: row.denied,
      'of which from the cache': row.cached,
      'false denials': row.falseDenied,
    })),
  }),
);

// Region a's share of the per-key rule a second (the regions share it equally): a key above it needs the federation.
const perKeyRule = a.config.rules.find((rule) => rule.name === 'per-key')!;
const shareRate = perKeyRule.limit / (perKeyRule.period / 1000) / fed.regions.length;
const rankBands: [number, number][] = [
  [0, 20],
  [20, 50],
  [50, 100],
  [100, 200],
  [200, 1_000],
  [1_000, Number.POSITIVE_INFINITY],
];
console.log(
  `\n${renderTable({
    id: 'probe-loud-ranks',
    title: `Region a's loud keys by rank (region a's share of the per-key limit: ${shareRate.toFixed(2)}/s per key)`,
    columns: ['ranks', 'loud keys', 'their decisions', 'denied', 'requests/s per loud key'],
    rows: rankBands.map(([from, to]) => {
      const band = loudRanks.filter(([rank]) => rank >= from && rank < to);
      const sent = band.reduce((sum, [, n]) => sum + n, 0);
      return {
        ranks: `${from + 1}-${Number.isFinite(to) ? to : 'end'}`,
        'loud keys': band.length,
        'their decisions': sent,
        denied: band.reduce((sum, [, , denied]) => sum + denied, 0),
        'requests/s per loud key': band.length > 0 ? (sent / band.length / seconds).toFixed(2) : '–',
      };
    }),
  })}`,
);

// Our scripts by name (their SHA1, as ioredis sends EVALSHA); BullMQ's stay SHAs.
const scriptNames = new Map(
  (Object.keys(SCRIPTS) as ScriptName[]).map((name) => [createHash('sha1').update(luaSource(name)).digest('hex').slice(0, 16), name]),
);
/** A command's name, scripts by name or their first characters (EVALSHA by SHA, FCALL by function). */
const commandName = (args: string[]): string => {
  const name = String(args[0]).toLowerCase();
  if (name !== 'evalsha' && name !== 'fcall') return name;
  const id = String(args[1]).slice(0, 16);
  return `${name} ${scriptNames.get(id) ?? id}`;
};
/** Rows per Redis (PROBE_ROWS): the commands with the most Redis time. */
const shownRows = Number(process.env.PROBE_ROWS ?? 12);
for (const region of fed.regions) {
  const log = slowlogs.get(region.name)!;
  const byCommand = new Map<string, { calls: number; micros: number }>();
  for (const [, , micros, args] of log) {
    const entry = byCommand.get(commandName(args)) ?? { calls: 0, micros: 0 };
    entry.calls++;
    entry.micros += micros;
    byCommand.set(commandName(args), entry);
  }
  const clients = new Map<string, number>();
  for (const line of readFileSync(monitorFile(region.name), 'utf8').split('\n')) {
    const match = /^\S+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
    if (!match || match[1]!.startsWith('lua')) continue;
    const args = [...match[2]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
    clients.set(commandName(args), (clients.get(commandName(args)) ?? 0) + 1);
  }
  const rows: Row[] = [...byCommand]
    .sort((x, y) => y[1].micros - x[1].micros)
    .slice(0, shownRows)
    .map(([command, entry]) => ({
      command,
      'µs per decision': entry.micros / decisions,
      'µs per call': entry.micros / entry.calls,
      calls: entry.calls,
      'from clients in 2 s (MONITOR)': clients.get(command) ?? 0,
    }));
  rmSync(monitorFile(region.name), { force: true });
  const sent = [...clients.values()].reduce((total, count) => total + count, 0);
  console.log(
    `\n${renderTable({
      id: `probe-redis-${region.name}`,
      title: `Region ${region.name}'s Redis (SLOWLOG over the run; MONITOR 2 s: ${sent.toLocaleString('en-US')} client commands)`,
      columns: ['command', 'µs per decision', 'µs per call', 'calls', 'from clients in 2 s (MONITOR)'],
      rows,
    })}`,
  );
}
// Who sends whom how many jobs: each region's sent batches and bytes per peer (its own metrics).
const linkRows: Row[] = [];
for (const region of fed.regions) {
  const metrics = await region.registry.getMetricsAsJSON();
  const sent = (name: string, peer: string) =>
    metrics
      .find((metric) => metric.name === name)
      ?.values.filter((value) => value.labels.peer === peer && value.labels.direction === 'sent')
      .reduce((total, value) => total + value.value, 0) ?? 0;
  for (const peer of fed.regions.filter((other) => other !== region)) {
    const jobs = sent('quotafed_federation_batches_total', peer.config.region);
    linkRows.push({
      link: `${region.name} → ${peer.name}`,
      'jobs per 1,000 decisions': (1000 * jobs) / decisions,
      'jobs/s': jobs / seconds,
      'bytes per job': jobs > 0 ? sent('quotafed_federation_bytes_total', peer.config.region) / jobs : 0,
    });
  }
}
console.log(
  `\n${renderTable({
    id: 'probe-links',
    title: "Gossip jobs per link (each region's quotafed_federation_batches_total and bytes_total, sent)",
    columns: ['link', 'jobs per 1,000 decisions', 'jobs/s', 'bytes per job'],
    rows: linkRows,
  })}`,
);
await fed.close();
process.exit(0);

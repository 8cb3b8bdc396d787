// 10. Federation at scale: one region standalone beside a three-region federation, in one run, load on one
// region's POST /v1/check only. Regions are regions/*.yaml (links straight to the peers' Redis, syncIntervalMs
// 100, budget 5%); "standalone" is us-east without its federation section. One API key per request, drawn
// uniformly from K keys or Zipf(1.0) over a key space; the per-key token bucket (1,000/min) decides.
//
// Per decision: CPU of the sending region (service + its redis-server, from /proc/<pid>/stat) and of the whole
// federation, the sending Redis's commands (INFO commandstats), gossip bytes over all links (the services'
// quotafed_federation_bytes_total), Redis used_memory per state key; besides: an idle federated region's Redis
// commands/s, the p99 at a fixed offered rate of half standalone's saturation, and decisions/s.
//
// Sizes: `--keys 1000,100000,1000000` (uniform cases), `--zipf 1000000` (Zipf key space, 0 for none),
// `--seconds 10` (per measured phase), `--rounds 4` (the saturation phase split into rounds that alternate
// between the two sides, so drift of a shared machine weighs on both), `--lease N` (rules[].lease of N units /
// 100 ms on every rule that can lease, both sides; docs/leases.md), `--warm-up S` (seconds of load on other keys
// before the measured rounds, both sides; 2 by default: a peer's code is still being optimised by V8 then, see
// docs/performance.md, eighteenth pass); or QUOTAFED_BENCH_FEDERATION_KEYS / _ZIPF / _SECONDS / _ROUNDS / _LEASE /
// _WARM_UP; `--algorithm fixedWindow` (or slidingWindow, QUOTAFED_BENCH_FEDERATION_ALGORITHM): the per-key rule's
// algorithm on both sides instead of regions/*.yaml's token bucket. `--quick` is 1,000 and 100,000 uniform, Zipf over
// 100,000, 3 s, 2 rounds. It runs only when named in `--only` (minutes of its own).
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { parse as parseYaml } from 'yaml';
import { FEDERATED_ALGORITHMS, Rule, type Algorithm, type ConfigInput } from '../../src/config/schema.ts';
import { startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { newClient, type BenchContext, type Section } from '../lib/context.ts';
import type { KeyDistribution } from '../lib/key-draw.ts';
import type { KeyedLoadFigures, KeyedLoadOptions } from '../lib/keyed-load.ts';
import { processCpuMicros, runKeyedLoad, startServer, type ProcessIo, type ServerProcess } from '../lib/processes.ts';
import { untilSecondOfMinute } from '../lib/minute-start.ts';
import { progress } from '../lib/progress.ts';
import { histogramBuckets, quantileBetween, sumOf } from '../lib/prom-text.ts';
import { callsDelta, commandCalls, commandMicros, netBytes, totalCalls, usedMemory, type CommandCalls } from '../lib/redis-stats.ts';
import { round, spreadOf, withSpread } from '../lib/stats.ts';
import type { Row, Table } from '../lib/table.ts';

const REGIONS = ['us-east', 'eu-west', 'ap-south'] as const;
type RegionName = (typeof REGIONS)[number];
const SENDER: RegionName = 'us-east';
const RULE = 'per-key';
const SATURATION_CONNECTIONS = 32;
/** autocannon fires a fixed rate's connections together: few connections keep arrivals smooth. */
const FIXED_RATE_CONNECTIONS = 8;
const MEMORY_SAMPLE_KEYS = 200;

export interface FederationBenchSizes {
  /** rules[].lease { size, ttlMs: 100 } on every rule that can lease (`--lease N`; 0: none, the default). */
  lease: number;
  /** The per-key rule's algorithm on both sides (`--algorithm`; regions/*.yaml's tokenBucket by default). */
  algorithm: Algorithm;
  uniformKeys: number[];
  /** Zipf key space; 0: no Zipf case. */
  zipfKeys: number;
  /** Seconds per measured phase. */
  seconds: number;
  /** Rounds the saturation phase is split into, alternating between standalone and federated. */
  rounds: number;
  /** Seconds of load on other keys before the measured rounds (`--warm-up S`). */
  warmUpS: number;
  /**
   * Fixed offered rates of the rate sweep (`--rates 500,1000,2000`): each side's CPU at each, so a cost that grows
   * with decisions and one that is paid per second (sync rounds, jobs) show apart; none by default.
   */
  rates: number[];
}

interface BenchCase {
  id: string;
  label: string;
  /** The per-key rule's algorithm (`--algorithm`). */
  algorithm: Algorithm;
  distribution: KeyDistribution;
  keys: number;
}

function flag(argv: readonly string[], name: string): string | undefined {
  const at = argv.indexOf(`--${name}`);
  return at === -1 ? undefined : argv[at + 1];
}

/** The sizes from the command line, the environment or the run mode, in that order. */
export function federationSizes(quick: boolean, argv: readonly string[] = process.argv, env = process.env): FederationBenchSizes {
  const keys = flag(argv, 'keys') ?? env.QUOTAFED_BENCH_FEDERATION_KEYS;
  const zipf = flag(argv, 'zipf') ?? env.QUOTAFED_BENCH_FEDERATION_ZIPF;
  const seconds = flag(argv, 'seconds') ?? env.QUOTAFED_BENCH_FEDERATION_SECONDS;
  const rounds = flag(argv, 'rounds') ?? env.QUOTAFED_BENCH_FEDERATION_ROUNDS;
  const lease = flag(argv, 'lease') ?? env.QUOTAFED_BENCH_FEDERATION_LEASE;
  const warmUp = flag(argv, 'warm-up') ?? env.QUOTAFED_BENCH_FEDERATION_WARM_UP;
  const rates = flag(argv, 'rates') ?? env.QUOTAFED_BENCH_FEDERATION_RATES;
  const algorithm = flag(argv, 'algorithm') ?? env.QUOTAFED_BENCH_FEDERATION_ALGORITHM ?? 'tokenBucket';
  if (!FEDERATED_ALGORITHMS.has(algorithm as Algorithm))
    throw new Error(`federation bench: --algorithm must be one of ${[...FEDERATED_ALGORITHMS].join(', ')}, got "${algorithm}"`);
  const positive = (text: string, what: string) => {
    const value = Number(text.replace(/_/g, ''));
    if (!Number.isFinite(value) || value < 0) throw new Error(`federation bench: ${what} must be a number >= 0, got "${text}"`);
    return value;
  };
  return {
    lease: lease !== undefined ? Math.round(positive(lease, '--lease')) : 0,
    algorithm: algorithm as Algorithm,
    uniformKeys: keys
      ? keys
          .split(',')
          .filter(Boolean)
          .map((k) => positive(k, '--keys'))
          // `--keys 0`: no uniform case (with `--zipf N`, the Zipf case alone).
          .filter((k) => k > 0)
      : quick
        ? [1_000, 100_000]
        : [1_000, 100_000, 1_000_000],
    zipfKeys: zipf !== undefined ? positive(zipf, '--zipf') : quick ? 100_000 : 1_000_000,
    seconds: seconds !== undefined ? Math.max(1, positive(seconds, '--seconds')) : quick ? 3 : 10,
    rounds: rounds !== undefined ? Math.max(1, Math.round(positive(rounds, '--rounds'))) : quick ? 2 : 4,
    warmUpS: warmUp !== undefined ? positive(warmUp, '--warm-up') : 2,
    rates: rates
      ? rates
          .split(',')
          .filter(Boolean)
          .map((rate) => Math.round(positive(rate, '--rates')))
          .filter((rate) => rate > 0)
      : [],
  };
}

function casesOf(sizes: FederationBenchSizes): BenchCase[] {
  // Another algorithm than regions/*.yaml's names itself in each case (its figures apart from the token bucket's).
  const other = sizes.algorithm === 'tokenBucket' ? undefined : sizes.algorithm;
  const id = (base: string) => (other ? `${base}-${other}` : base);
  const label = (base: string) => (other ? `${base}, ${other}` : base);
  const cases: BenchCase[] = sizes.uniformKeys.map((keys) => ({
    id: id(`u${keys}`),
    label: label(`${keys.toLocaleString('en-US')} uniform`),
    algorithm: sizes.algorithm,
    distribution: 'uniform',
    keys,
  }));
  if (sizes.zipfKeys > 0)
    cases.push({
      id: id(`z${sizes.zipfKeys}`),
      label: label(`${sizes.zipfKeys.toLocaleString('en-US')} Zipf(1.0)`),
      algorithm: sizes.algorithm,
      distribution: 'zipf',
      keys: sizes.zipfKeys,
    });
  return cases;
}

/** A region's config from regions/<name>.yaml: its rules and federation settings, peers at the given Redis URLs. */
function regionConfig(
  name: RegionName,
  redisUrls: Partial<Record<RegionName, string>>,
  federated: boolean,
  sizes: Pick<FederationBenchSizes, 'lease' | 'algorithm'>,
): Omit<ConfigInput, 'redis'> {
  const file = parseYaml(readFileSync(new URL(`../../regions/${name}.yaml`, import.meta.url), 'utf8')) as ConfigInput;
  const { lease, algorithm } = sizes;
  // `--lease N`: local leases (docs/leases.md) on every rule that can take one, as the schema says (both sides alike);
  // `--algorithm`: the per-key rule's algorithm.
  const ruleFor = (input: NonNullable<ConfigInput['rules']>[number]) => {
    const rule = input.name === RULE ? { ...input, algorithm } : input;
    if (lease <= 0) return rule;
    const withLease = { ...rule, lease: { size: lease, ttlMs: 100 } };
    return Rule.safeParse(withLease).success ? withLease : rule;
  };
  const config: Omit<ConfigInput, 'redis'> = { region: name, rules: file.rules?.map(ruleFor) };
  if (file.identity) config.identity = file.identity;
  if (federated) {
    const federation = file.federation ?? {};
    config.federation = {
      ...federation,
      // Every Redis here starts empty: a brand-new federation, so no peer's silence fences a window.
      bootstrap: 'new',
      peers: (federation.peers ?? []).map((peer) => ({ ...peer, redisUrl: redisUrls[peer.name as RegionName]! })),
    };
  }
  return config;
}

/** One region under test: its redis-server, an admin client on it, and its service process. */
interface RegionUnderTest {
  name: RegionName;
  redis: RedisProcess;
  admin: Redis;
  service: ServerProcess;
}

async function startRegions(
  names: readonly RegionName[],
  federated: boolean,
  sizes: Pick<FederationBenchSizes, 'lease' | 'algorithm'>,
): Promise<RegionUnderTest[]> {
  const servers = await Promise.all(names.map(() => startRedis()));
  const urls = Object.fromEntries(names.map((name, i) => [name, servers[i]!.url])) as Record<RegionName, string>;
  const admins = servers.map((server) => newClient(server.url));
  const services = await Promise.allSettled(
    names.map((name, i) => startServer('service', { redisUrl: servers[i]!.url, config: regionConfig(name, urls, federated, sizes) })),
  );
  const failed = services.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  const regions = names.map((name, i) => ({
    name,
    redis: servers[i]!,
    admin: admins[i]!,
    service: services[i]!.status === 'fulfilled' ? (services[i] as PromiseFulfilledResult<ServerProcess>).value : undefined,
  }));
  if (failed) {
    await stopRegions(regions);
    throw failed.reason;
  }
  return regions as RegionUnderTest[];
}

async function stopRegions(regions: readonly { admin: Redis; redis: RedisProcess; service: ServerProcess | undefined }[]): Promise<void> {
  await Promise.all(regions.map((region) => region.service?.stop()));
  await Promise.all(regions.map((region) => region.admin.quit().catch(() => region.admin.disconnect())));
  await Promise.all(regions.map((region) => region.redis.stop()));
}

/** Service CPU + its Redis's CPU (µs) so far. */
function cpuOf(region: RegionUnderTest): { service: number; redis: number } {
  return { service: region.service.cpuMicros() ?? Number.NaN, redis: processCpuMicros(region.redis.pid) ?? Number.NaN };
}

async function metricsText(region: RegionUnderTest): Promise<string> {
  const response = await fetch(`${region.service.url}/metrics`);
  return response.text();
}

/** Rule state keys in a region's Redis and up to `sample` of their names (unless `countAll`, the scan stops once it has them). */
async function stateKeys(admin: Redis, sample: number, countAll = false): Promise<{ count: number; sample: string[] }> {
  let cursor = '0';
  let count = 0;
  const names: string[] = [];
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', `qf:{s*}:${RULE}:*`, 'COUNT', 10_000);
    cursor = next;
    count += batch.length;
    for (const name of batch) if (names.length < sample) names.push(name);
  } while (cursor !== '0' && (countAll || sample === 0 || names.length < sample));
  return { count, sample: names };
}

/**
 * Rule state keys of every region (SCAN), then used_memory of every region, then the mean MEMORY USAGE (key and
 * value) of up to MEMORY_SAMPLE_KEYS of the sending region's state keys: read right after the load stops, since a
 * token bucket's key lives only until it has refilled.
 */
async function memoryAtEnd(regions: readonly RegionUnderTest[]): Promise<{ memory: number[]; keys: number[]; memoryUsage?: number }> {
  const scanned = await Promise.all(regions.map((region, i) => stateKeys(region.admin, i === 0 ? MEMORY_SAMPLE_KEYS : 0, true)));
  const memory = await Promise.all(regions.map((region) => usedMemory(region.admin)));
  let total = 0;
  let counted = 0;
  for (const key of scanned[0]!.sample) {
    // A key may have expired since the scan saw it.
    const bytes = (await regions[0]!.admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
    if (bytes === null) continue;
    total += bytes;
    counted++;
  }
  const keys = scanned.map((result) => result.count);
  return counted ? { memory, keys, memoryUsage: total / counted } : { memory, keys };
}

/** Waits until the sending region's backlog gauge reads 0 twice in a row, or `maxMs`; returns what is left. */
async function drain(sender: RegionUnderTest, maxMs: number): Promise<number> {
  const deadline = performance.now() + maxMs;
  let zeros = 0;
  let left = Number.NaN;
  let lastReport = performance.now();
  while (performance.now() < deadline) {
    left = sumOf(await metricsText(sender), 'quotafed_federation_backlog_keys');
    zeros = left === 0 ? zeros + 1 : 0;
    if (zeros >= 2) return 0;
    if (performance.now() - lastReport > 5_000) {
      lastReport = performance.now();
      progress(`federation: draining, ${left.toLocaleString('en-US')} keys still pending to peers`);
    }
    await sleep(250);
  }
  return left;
}

interface Snapshot {
  cpu: { service: number; redis: number }[];
  /** Per region: its service's write system calls and wake-ups. */
  io: ProcessIo[];
  calls: CommandCalls[];
  /** The sending Redis's µs inside each command. */
  senderMicros: CommandCalls;
  memory: number[];
  netInput: number[];
  metrics: string[];
}

async function snapshot(regions: readonly RegionUnderTest[]): Promise<Snapshot> {
  // Redis readings first, CPU last: the INFO calls themselves cost the bench, not the limiter.
  const calls = await Promise.all(regions.map((region) => commandCalls(region.admin)));
  const senderMicros = await commandMicros(regions[0]!.admin);
  const memory = await Promise.all(regions.map((region) => usedMemory(region.admin)));
  const netInput = (await Promise.all(regions.map((region) => netBytes(region.admin)))).map((net) => net.input);
  const metrics = await Promise.all(regions.map(metricsText));
  const io = regions.map((region) => region.service.io() ?? { writes: Number.NaN, wakeups: Number.NaN });
  return { cpu: regions.map(cpuOf), io, calls, senderMicros, memory, netInput, metrics };
}

/** Figures of one side (standalone or federated) of one case. */
interface SideFigures {
  decisionsPerSec: number;
  decisions: number;
  senderServiceUs: number;
  senderRedisUs: number;
  wholeUs: number;
  commandsPerDecision: number;
  /** The sending Redis per decision, by command: calls and µs inside Redis (commandstats). */
  byCommand: Record<string, { calls: number; micros: number }>;
  netInputPerDecision: number;
  memoryPerKey: number;
  peerMemoryPerKey?: number;
  memoryUsage?: number;
  /** Rule state keys in the sending region's Redis when the load stopped. */
  stateKeys: number;
  halfRate: number;
  halfP99Ms: number;
  halfP50Ms: number;
  /**
   * The limiter's own p99 at the fixed rate (ms): the sending service's quotafed_limiter_overhead_seconds over the
   * rounds, interpolated in its bucket; a maxWaitMs wait counts once, for the request that waited.
   */
  halfLimiterP99Ms: number;
  /** Requests parked on a false denial (maxWaitMs) in the fixed-rate rounds. */
  halfParked: number;
  halfAchieved: number;
  /** Whole federation CPU µs/decision at the fixed rate (no catch-up wait: the load's rate is below saturation). */
  halfWholeUs: number;
  /** The sending region's (service + Redis) at the fixed rate. */
  halfSenderUs: number;
  gossipBytesPerDecision?: number;
  gossipJobsPerDecision?: number;
  fastLaneKeysPerDecision?: number;
  falseDenialsPerDecision?: number;
  grantsPerDecision?: number;
  /** Of the sending service's rule decisions: the share answered in process (over-limit cache), and limited. */
  cachedShare: number;
  limitedShare: number;
  syncLagP99Ms?: number;
  idleCommandsPerSec?: number;
  /** CPU of the busiest region (service + Redis) while idle, ms per second. */
  idleCpuMsPerSec?: number;
  /** The busiest idle service's wake-ups a second and its CPU per wake-up (µs): what an idle event loop costs here. */
  idleWakeupsPerSec?: number;
  idleCpuPerWakeupUs?: number;
  /** The sending service's write system calls and wake-ups per decision. */
  senderWrites: number;
  senderWakeups: number;
  /** The peers' services' write system calls and wake-ups per decision of the sender (the sum over the peers). */
  peerWrites?: number;
  peerWakeups?: number;
  /** The peers' CPU per decision of the sender (services, Redis: the sum over the peers). */
  peerServiceUs?: number;
  peerRedisUs?: number;
  backlogLeft?: number;
  non200: number;
  /** Each saturation round alone, in order (rounds pair up across the sides: roundSpread). */
  rounds: RoundFigures[];
}

/** One saturation round of one side: CPU µs per decision (sending region, whole federation) and decisions/s. */
export interface RoundFigures {
  senderUs: number;
  wholeUs: number;
  decisionsPerSec: number;
}

/**
 * The least and the greatest of the per-round ratios federated / standalone of `pick`, round i of one side paired with
 * round i of the other (they ran back to back): how far the ratio moves from round to round within one run.
 * Undefined with fewer than two pairs.
 *
 * @example
 * roundSpread([{ senderUs: 10, wholeUs: 10, decisionsPerSec: 100 }, ...], [...], (r) => r.wholeUs); // [1.47, 1.64]
 */
export function roundSpread(
  standalone: readonly RoundFigures[],
  federated: readonly RoundFigures[],
  pick: (round: RoundFigures) => number,
): [number, number] | undefined {
  const ratios: number[] = [];
  for (let i = 0; i < Math.min(standalone.length, federated.length); i++) {
    const base = pick(standalone[i]!);
    if (base > 0) ratios.push(pick(federated[i]!) / base);
  }
  return spreadOf(ratios);
}

const non200 = (figures: KeyedLoadFigures) =>
  Object.entries(figures.statuses)
    .filter(([code]) => code !== '200')
    .reduce((sum, [, count]) => sum + count, 0) +
  figures.errors +
  figures.timeouts;

/** What the rounds of one side added up: the saturation load's figures and every reading's delta. */
interface SideTotals {
  decisions: number;
  seconds: number;
  non200: number;
  /** Per region: CPU µs of the service and of its Redis. */
  cpu: { service: number; redis: number }[];
  /** Per region: its service's write system calls and wake-ups. */
  io: ProcessIo[];
  /** The sending Redis: calls and µs inside each command. */
  calls: CommandCalls;
  micros: CommandCalls;
  netInput: number;
  /** Federated: the services' counters (sent), and the peers' sync-lag buckets for us-east, before and after. */
  gossipBytes: number;
  gossipJobs: number;
  fastLaneKeys: number;
  falseDenials: number;
  grants: number;
  /** The sending service's rule decisions (quotafed_decisions_total): all, answered in process (cache), limited. */
  ruleDecisions: number;
  cachedDecisions: number;
  limitedDecisions: number;
  lagBefore: Map<number, number>;
  lagAfter: Map<number, number>;
  /** Each round alone. */
  rounds: RoundFigures[];
}

const addCalls = (into: CommandCalls, delta: CommandCalls) => {
  for (const [name, value] of Object.entries(delta)) into[name] = (into[name] ?? 0) + value;
};

/** One side of a case, started and ready: its regions stay up while the rounds alternate between the sides. */
interface Side {
  federated: boolean;
  regions: RegionUnderTest[];
  /** What each region's Redis held before any load: the base of memory per key. */
  empty: number[];
  idleCommandsPerSec?: number;
  idleCpuMsPerSec?: number;
  idleWakeupsPerSec?: number;
  idleCpuPerWakeupUs?: number;
  totals: SideTotals;
  /** The fixed-rate rounds' figures. */
  fixedRate: KeyedLoadFigures[];
  /** CPU of every region over the fixed-rate rounds, and the decisions answered in them. */
  fixedCpu: FixedRateCpu;
  end?: { memory: number[]; keys: number[]; memoryUsage?: number };
  backlogLeft?: number;
  load(extra: Partial<KeyedLoadOptions>): Promise<KeyedLoadFigures>;
}

async function openSide(bench: BenchCase, sizes: FederationBenchSizes, federated: boolean): Promise<Side> {
  const side = federated ? 'federated' : 'standalone';
  const names = federated ? REGIONS : ([SENDER] as const);
  progress(`federation ${bench.label}, ${side}: starting ${names.length} region(s)`);
  const regions = await startRegions(names, federated, sizes);
  const sender = regions[0]!;
  const load = (extra: Partial<KeyedLoadOptions>) =>
    runKeyedLoad({
      url: sender.service.url,
      connections: SATURATION_CONNECTIONS,
      durationS: sizes.seconds,
      distribution: bench.distribution,
      keys: bench.keys,
      prefix: 'k-',
      ...extra,
    });
  const empty = await Promise.all(regions.map((region) => usedMemory(region.admin)));
  const opened: Side = {
    federated,
    regions,
    empty,
    load,
    fixedRate: [],
    fixedCpu: emptyFixedRateCpu(),
    totals: {
      decisions: 0,
      seconds: 0,
      non200: 0,
      cpu: regions.map(() => ({ service: 0, redis: 0 })),
      io: regions.map(() => ({ writes: 0, wakeups: 0 })),
      calls: {},
      micros: {},
      netInput: 0,
      gossipBytes: 0,
      gossipJobs: 0,
      fastLaneKeys: 0,
      falseDenials: 0,
      grants: 0,
      ruleDecisions: 0,
      cachedDecisions: 0,
      limitedDecisions: 0,
      lagBefore: new Map(),
      lagAfter: new Map(),
      rounds: [],
    },
  };
  try {
    if (federated) {
      // Idle: the regions have started and nothing is sent; what their Redis does on its own.
      await sleep(1_000);
      const idleS = Math.min(3, sizes.seconds);
      progress(`federation ${bench.label}, ${side}: idle regions (${idleS} s)`);
      const before = await Promise.all(regions.map((region) => commandCalls(region.admin)));
      const cpuBefore = regions.map(cpuOf);
      const ioBefore = regions.map((region) => region.service.io());
      await sleep(idleS * 1000);
      const cpuAfter = regions.map(cpuOf);
      const ioAfter = regions.map((region) => region.service.io());
      const after = await Promise.all(regions.map((region) => commandCalls(region.admin)));
      opened.idleCommandsPerSec = Math.max(...regions.map((_, i) => totalCalls(callsDelta(before[i]!, after[i]!)) / idleS));
      opened.idleCpuMsPerSec = Math.max(
        ...regions.map((_, i) => (cpuAfter[i]!.service - cpuBefore[i]!.service + cpuAfter[i]!.redis - cpuBefore[i]!.redis) / 1000 / idleS),
      );
      // An idle service is woken by its timers and its replies: on a virtual machine each wake-up costs tens to
      // hundreds of µs of CPU (docs/performance.md, thirtieth pass), which is most of an idle region's cost.
      // (Left out where /proc is missing.)
      const wakeups = regions.map((_, i) => (ioAfter[i]?.wakeups ?? Number.NaN) - (ioBefore[i]?.wakeups ?? Number.NaN));
      const busiest = wakeups.reduce((best, count, i) => (count > wakeups[best]! ? i : best), 0);
      if (wakeups[busiest]! > 0) {
        opened.idleWakeupsPerSec = wakeups[busiest]! / idleS;
        opened.idleCpuPerWakeupUs = (cpuAfter[busiest]!.service - cpuBefore[busiest]!.service) / wakeups[busiest]!;
      }
    }
    // A fresh Node server spends up to twice its steady CPU while its code is optimised: warm up on other keys,
    // drawn as the measured ones are. (A warm-up on 1,000 keys at saturation made those keys loud: they held
    // grants and were swept every round for the rest of their epoch, inside the measured interval.)
    const warmS = sizes.warmUpS;
    progress(`federation ${bench.label}, ${side}: warm-up (${warmS} s, ${bench.label} other keys, not recorded)`);
    await load({ durationS: warmS, prefix: 'warm-', seed: 7 });
    if (federated) await drain(sender, drainMs(sizes));
    return opened;
  } catch (error) {
    await stopRegions(regions);
    throw error;
  }
}

const drainMs = (sizes: FederationBenchSizes) => Math.max(5_000, sizes.seconds * 3_000);

/** One saturation round of a side (`seconds` long), its readings added to the side's totals. */
async function saturationRound(
  bench: BenchCase,
  sizes: FederationBenchSizes,
  side: Side,
  round: number,
  seconds: number,
  last: boolean,
): Promise<void> {
  const { regions, federated, totals } = side;
  const sender = regions[0]!;
  const name = federated ? 'federated' : 'standalone';
  const before = await snapshot(regions);
  progress(`federation ${bench.label}, ${name}: saturation round ${round + 1}, ${SATURATION_CONNECTIONS} connections (${seconds} s)`);
  const saturation = await side.load({ durationS: seconds, seed: 11 + round });
  if (federated) {
    progress(`federation ${bench.label}, ${name}: waiting for the peers to catch up (at most ${Math.round(drainMs(sizes) / 1000)} s)`);
    side.backlogLeft = await drain(sender, drainMs(sizes));
  }
  const after = await snapshot(regions);
  // After the CPU reading: counting the state keys SCANs every key, which is the bench's work, not the limiter's
  // (at 1 M keys it cost about a second of the sending Redis's CPU, charged to the decisions before).
  if (last) side.end = await memoryAtEnd(regions);

  totals.decisions += saturation.requests;
  totals.seconds += saturation.requests / Math.max(saturation.rps, 1e-9);
  totals.non200 += non200(saturation);
  // Each region's CPU over the round: into the side's totals, and the round's own figures (the sender is region 0).
  const used = regions.map((_, i) => after.cpu[i]!.service - before.cpu[i]!.service + after.cpu[i]!.redis - before.cpu[i]!.redis);
  const decided = Math.max(saturation.requests, 1);
  totals.rounds.push({
    senderUs: used[0]! / decided,
    wholeUs: used.reduce((sum, micros) => sum + micros, 0) / decided,
    decisionsPerSec: saturation.rps,
  });
  for (let i = 0; i < regions.length; i++) {
    totals.cpu[i]!.service += after.cpu[i]!.service - before.cpu[i]!.service;
    totals.cpu[i]!.redis += after.cpu[i]!.redis - before.cpu[i]!.redis;
    totals.io[i]!.writes += after.io[i]!.writes - before.io[i]!.writes;
    totals.io[i]!.wakeups += after.io[i]!.wakeups - before.io[i]!.wakeups;
    totals.netInput += after.netInput[i]! - before.netInput[i]!;
  }
  addCalls(totals.calls, callsDelta(before.calls[0]!, after.calls[0]!));
  const decisionsOf = (snap: Snapshot, where: Record<string, string>) => sumOf(snap.metrics[0]!, 'quotafed_decisions_total', where);
  totals.ruleDecisions += decisionsOf(after, {}) - decisionsOf(before, {});
  totals.cachedDecisions += decisionsOf(after, { source: 'cache' }) - decisionsOf(before, { source: 'cache' });
  totals.limitedDecisions += decisionsOf(after, { outcome: 'limited' }) - decisionsOf(before, { outcome: 'limited' });
  addCalls(totals.micros, callsDelta(before.senderMicros, after.senderMicros));
  if (federated) {
    const sent = (s: Snapshot, metric: string) => s.metrics.reduce((sum, text) => sum + sumOf(text, metric, { direction: 'sent' }), 0);
    totals.gossipBytes += sent(after, 'quotafed_federation_bytes_total') - sent(before, 'quotafed_federation_bytes_total');
    totals.gossipJobs += sent(after, 'quotafed_federation_batches_total') - sent(before, 'quotafed_federation_batches_total');
    const fastLane = (s: Snapshot) => s.metrics.reduce((sum, text) => sum + sumOf(text, 'quotafed_federation_fast_lane_keys_total'), 0);
    totals.fastLaneKeys += fastLane(after) - fastLane(before);
    const summed = (snap: Snapshot, metric: string) => snap.metrics.reduce((sum, text) => sum + sumOf(text, metric), 0);
    totals.falseDenials +=
      summed(after, 'quotafed_federation_false_denials_total') - summed(before, 'quotafed_federation_false_denials_total');
    totals.grants += summed(after, 'quotafed_federation_grants_total') - summed(before, 'quotafed_federation_grants_total');
    // What the peers saw of us-east's changes: their sync-lag histograms for peer us-east, pooled over the rounds.
    for (let j = 1; j < regions.length; j++) {
      for (const [le, count] of histogramBuckets(before.metrics[j]!, 'quotafed_federation_sync_lag_seconds', { peer: SENDER }))
        totals.lagBefore.set(le, (totals.lagBefore.get(le) ?? 0) + count);
      for (const [le, count] of histogramBuckets(after.metrics[j]!, 'quotafed_federation_sync_lag_seconds', { peer: SENDER }))
        totals.lagAfter.set(le, (totals.lagAfter.get(le) ?? 0) + count);
    }
  }
}

/** A side's figures from its totals and its fixed-rate rounds at `rate`. */
function finishSide(side: Side, rate: number): SideFigures {
  const { totals, federated, regions } = side;
  const decisions = totals.decisions;
  const end = side.end!;
  const memoryPerKey = (i: number) => (end.keys[i]! > 0 ? (end.memory[i]! - side.empty[i]!) / end.keys[i]! : Number.NaN);
  let whole = 0;
  for (const cpu of totals.cpu) whole += cpu.service + cpu.redis;
  const figures: SideFigures = {
    decisionsPerSec: decisions / totals.seconds,
    decisions,
    senderServiceUs: totals.cpu[0]!.service / decisions,
    senderRedisUs: totals.cpu[0]!.redis / decisions,
    senderWrites: totals.io[0]!.writes / decisions,
    senderWakeups: totals.io[0]!.wakeups / decisions,
    wholeUs: whole / decisions,
    commandsPerDecision: totalCalls(totals.calls) / decisions,
    byCommand: byCommand(totals.calls, totals.micros, decisions),
    netInputPerDecision: totals.netInput / decisions,
    memoryPerKey: memoryPerKey(0),
    memoryUsage: end.memoryUsage,
    stateKeys: end.keys[0]!,
    halfRate: 0,
    halfP99Ms: Number.NaN,
    halfP50Ms: Number.NaN,
    halfAchieved: 0,
    cachedShare: totals.cachedDecisions / Math.max(totals.ruleDecisions, 1),
    limitedShare: totals.limitedDecisions / Math.max(totals.ruleDecisions, 1),
    halfLimiterP99Ms: (quantileBetween(new Map(), side.fixedCpu.limiter, 0.99, true) ?? Number.NaN) * 1000,
    halfParked: side.fixedCpu.parked,
    halfWholeUs: side.fixedCpu.micros / Math.max(side.fixedCpu.decisions, 1),
    halfSenderUs: side.fixedCpu.senderMicros / Math.max(side.fixedCpu.decisions, 1),
    non200: totals.non200,
    rounds: totals.rounds,
  };
  if (side.idleCommandsPerSec !== undefined) figures.idleCommandsPerSec = side.idleCommandsPerSec;
  if (side.idleCpuMsPerSec !== undefined) figures.idleCpuMsPerSec = side.idleCpuMsPerSec;
  if (side.idleWakeupsPerSec !== undefined) figures.idleWakeupsPerSec = side.idleWakeupsPerSec;
  if (side.idleCpuPerWakeupUs !== undefined) figures.idleCpuPerWakeupUs = side.idleCpuPerWakeupUs;
  if (side.backlogLeft !== undefined) figures.backlogLeft = side.backlogLeft;
  if (federated) {
    let service = 0;
    let redis = 0;
    for (const cpu of totals.cpu.slice(1)) {
      service += cpu.service;
      redis += cpu.redis;
    }
    figures.peerServiceUs = service / decisions;
    figures.peerRedisUs = redis / decisions;
    figures.peerWrites = totals.io.slice(1).reduce((sum, io) => sum + io.writes, 0) / decisions;
    figures.peerWakeups = totals.io.slice(1).reduce((sum, io) => sum + io.wakeups, 0) / decisions;
    const peers = regions.slice(1).map((_, j) => memoryPerKey(j + 1));
    figures.peerMemoryPerKey = peers.reduce((a, b) => a + b, 0) / peers.length;
    figures.gossipBytesPerDecision = totals.gossipBytes / decisions;
    figures.gossipJobsPerDecision = totals.gossipJobs / decisions;
    figures.fastLaneKeysPerDecision = totals.fastLaneKeys / decisions;
    figures.falseDenialsPerDecision = totals.falseDenials / decisions;
    figures.grantsPerDecision = totals.grants / decisions;
    const lag = quantileBetween(totals.lagBefore, totals.lagAfter, 0.99);
    if (lag !== undefined) figures.syncLagP99Ms = lag * 1000;
  }
  const median = (values: number[]) => {
    const sorted = [...values].sort((x, y) => x - y);
    return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
  };
  figures.halfRate = rate;
  figures.halfP99Ms = median(side.fixedRate.map((half) => half.p99Ms));
  figures.halfP50Ms = median(side.fixedRate.map((half) => half.p50Ms));
  figures.halfAchieved =
    side.fixedRate.reduce((sum, half) => sum + half.requests, 0) /
    side.fixedRate.reduce((sum, half) => sum + half.requests / Math.max(half.rps, 1e-9), 0);
  return figures;
}

/** What fixed-rate rounds of one side measured, summed over the rounds. */
interface FixedRateCpu {
  decisions: number;
  /**
   * The sending service's quotafed_limiter_overhead_seconds over the rounds (cumulative buckets, the rounds' counts
   * added): the limiter's own time per decision, a maxWaitMs wait included, one observation per decision.
   */
  limiter: Map<number, number>;
  /** Requests the sending service parked on a false denial (maxWaitMs) in the rounds. */
  parked: number;
  /** Wall time of the rounds' CPU windows (ms), the load process's start-up included. */
  ms: number;
  /** CPU (µs) of every region (service + Redis), and of the sending region alone. */
  micros: number;
  senderMicros: number;
}

const emptyFixedRateCpu = (): FixedRateCpu => ({ decisions: 0, limiter: new Map(), parked: 0, ms: 0, micros: 0, senderMicros: 0 });

/** One round of a side at a fixed offered rate, its CPU, wall time and decisions added to `into`. */
async function fixedRateLoad(side: Side, into: FixedRateCpu, seconds: number, rate: number, seed: number): Promise<KeyedLoadFigures> {
  // The sender's /metrics outside the CPU window: reading it costs the service a little.
  const metricsBefore = await metricsText(side.regions[0]!);
  const before = side.regions.map(cpuOf);
  const started = performance.now();
  const figures = await side.load({ connections: FIXED_RATE_CONNECTIONS, overallRate: rate, seed, durationS: seconds });
  into.ms += performance.now() - started;
  const after = side.regions.map(cpuOf);
  side.regions.forEach((_, i) => {
    const micros = after[i]!.service - before[i]!.service + after[i]!.redis - before[i]!.redis;
    into.micros += micros;
    if (i === 0) into.senderMicros += micros;
  });
  into.decisions += figures.requests;
  const metricsAfter = await metricsText(side.regions[0]!);
  const limiterBefore = histogramBuckets(metricsBefore, 'quotafed_limiter_overhead_seconds');
  for (const [le, count] of histogramBuckets(metricsAfter, 'quotafed_limiter_overhead_seconds'))
    into.limiter.set(le, (into.limiter.get(le) ?? 0) + count - (limiterBefore.get(le) ?? 0));
  into.parked += sumOf(metricsAfter, 'quotafed_federation_parked_total') - sumOf(metricsBefore, 'quotafed_federation_parked_total');
  return figures;
}

/** One round of a side's fixed-rate phase (`seconds` long, at `rate`), kept for finishSide. */
async function fixedRateRound(bench: BenchCase, side: Side, round: number, seconds: number, rate: number): Promise<void> {
  progress(
    `federation ${bench.label}, ${side.federated ? 'federated' : 'standalone'}: fixed ${rate}/s round ${round + 1}, ${FIXED_RATE_CONNECTIONS} connections (${seconds} s)`,
  );
  side.fixedRate.push(await fixedRateLoad(side, side.fixedCpu, seconds, rate, 2 + round));
}

/** Both sides at one offered rate of the rate sweep (`--rates`). */
interface SweepPoint {
  rate: number;
  standalone: FixedRateCpu;
  federated: FixedRateCpu;
}

/** The sides in round `round`'s order: standalone first in even rounds, federated first in odd ones. */
function inTurn(round: number, standalone: Side, federated: Side): [Side, Side] {
  return round % 2 === 0 ? [standalone, federated] : [federated, standalone];
}

/** The length of one round (s): each measured phase split into `sizes.rounds` rounds, at least a second each. */
function roundSeconds(sizes: FederationBenchSizes): number {
  return Math.max(1, sizes.seconds / sizes.rounds);
}

/**
 * Both sides of a case, their saturation phase split into `sizes.rounds` rounds that alternate between the sides
 * (standalone first in even rounds, federated first in odd ones): a machine whose speed drifts during the run
 * (shared cores) then weighs on both sides alike, and the ratios compare like with like.
 */
async function measureCase(
  bench: BenchCase,
  sizes: FederationBenchSizes,
): Promise<{ standalone: SideFigures; federated: SideFigures; sweep: SweepPoint[] }> {
  const standalone = await openSide(bench, sizes, false);
  let federated: Side | undefined;
  try {
    federated = await openSide(bench, sizes, true);
    // BENCH_START_SECOND=s: the measured rounds start at second s of a minute, so runs of other code compare at the
    // same point of the token bucket's epoch (docs/performance.md, sixteenth pass: unaligned runs scatter with it).
    if (process.env.BENCH_START_SECOND)
      progress(`federation ${bench.label}: waiting for second ${process.env.BENCH_START_SECOND} of the minute`);
    await untilSecondOfMinute(process.env.BENCH_START_SECOND);
    const rounds = sizes.rounds;
    const seconds = roundSeconds(sizes);
    for (let round = 0; round < rounds; round++) {
      const order = inTurn(round, standalone, federated);
      for (const side of order) await saturationRound(bench, sizes, side, round, seconds, round === rounds - 1);
    }
    const rate = Math.max(100, Math.round(standalone.totals.decisions / standalone.totals.seconds / 2 / 50) * 50);
    // The fixed-rate phase alternates too; each side's p99 and p50 are the medians of its rounds'.
    for (let round = 0; round < rounds; round++) {
      const order = inTurn(round, standalone, federated);
      for (const side of order) await fixedRateRound(bench, side, round, seconds, rate);
    }
    const sweep: SweepPoint[] = [];
    for (const offered of sizes.rates) {
      const point: SweepPoint = { rate: offered, standalone: emptyFixedRateCpu(), federated: emptyFixedRateCpu() };
      for (let round = 0; round < rounds; round++) {
        const order = inTurn(round, standalone, federated);
        for (const side of order) {
          progress(`federation ${bench.label}, ${side.federated ? 'federated' : 'standalone'}: sweep at ${offered}/s (${seconds} s)`);
          await fixedRateLoad(side, side.federated ? point.federated : point.standalone, seconds, offered, 40 + offered);
        }
      }
      sweep.push(point);
    }
    return { standalone: finishSide(standalone, rate), federated: finishSide(federated, rate), sweep };
  } finally {
    await stopRegions(standalone.regions);
    if (federated) await stopRegions(federated.regions);
  }
}

function byCommand(calls: CommandCalls, micros: CommandCalls, decisions: number): Record<string, { calls: number; micros: number }> {
  const out: Record<string, { calls: number; micros: number }> = {};
  for (const [name, count] of Object.entries(calls)) out[name] = { calls: count / decisions, micros: (micros[name] ?? 0) / decisions };
  return out;
}

/** Where the sending Redis's time goes, command by command, on both sides (the commands a script runs count twice: in it and alone). */
function commandTable(bench: BenchCase, standalone: SideFigures, federated: SideFigures): Table {
  const names = [...new Set([...Object.keys(standalone.byCommand), ...Object.keys(federated.byCommand)])].sort(
    (a, b) => (federated.byCommand[b]?.micros ?? 0) - (federated.byCommand[a]?.micros ?? 0),
  );
  return {
    id: `federation-commands-${bench.id}`,
    title: `10c. Federation at scale, ${bench.label} keys: the sending Redis per decision, by command`,
    columns: ['command', 'standalone calls', 'standalone µs', 'federated calls', 'federated µs'],
    rows: names.map((name) => ({
      command: name,
      'standalone calls': round(standalone.byCommand[name]?.calls ?? 0, 3),
      'standalone µs': round(standalone.byCommand[name]?.micros ?? 0, 2),
      'federated calls': round(federated.byCommand[name]?.calls ?? 0, 3),
      'federated µs': round(federated.byCommand[name]?.micros ?? 0, 2),
    })),
    notes: [
      'INFO commandstats over the same interval as the CPU figures: µs inside Redis per decision, without the parsing, the ' +
        'networking and the other work of its event loop; a script (fcall) includes the commands it calls, which also show alone.',
    ],
  };
}

const ratioOf = (federated: number | undefined, standalone: number | undefined) =>
  federated === undefined || standalone === undefined || !(standalone > 0) ? undefined : round(federated / standalone, 2);

function caseTable(bench: BenchCase, standalone: SideFigures, federated: SideFigures): Table {
  const row = (measure: string, s: number | undefined, f: number | undefined, ratio: number | null | undefined = ratioOf(f, s)): Row => ({
    measure,
    standalone: s === undefined || Number.isNaN(s) ? null : round(s, 1),
    federated: f === undefined || Number.isNaN(f) ? null : round(f, 1),
    'federated / standalone': ratio ?? null,
  });
  const per1000 = (value: number | undefined) => (value === undefined ? undefined : value * 1000);
  const beyond = federated.netInputPerDecision - standalone.netInputPerDecision;
  return {
    id: `federation-${bench.id}`,
    title: `10. Federation at scale, ${bench.label} keys: us-east standalone vs three regions (load on us-east only)`,
    columns: ['measure', 'standalone', 'federated', 'federated / standalone'],
    rows: [
      row(`decisions/s at saturation (${SATURATION_CONNECTIONS} connections)`, standalone.decisionsPerSec, federated.decisionsPerSec),
      row('decisions measured', standalone.decisions, federated.decisions, null),
      row(
        'sending region CPU µs/decision (service + Redis)',
        standalone.senderServiceUs + standalone.senderRedisUs,
        federated.senderServiceUs + federated.senderRedisUs,
      ),
      row('  of which the service', standalone.senderServiceUs, federated.senderServiceUs),
      row('  of which its Redis', standalone.senderRedisUs, federated.senderRedisUs),
      row('whole federation CPU µs/decision (all services + all Redis)', standalone.wholeUs, federated.wholeUs),
      row("  of which the peers' services", undefined, federated.peerServiceUs, null),
      row("  of which the peers' Redis", undefined, federated.peerRedisUs, null),
      row(
        'sending service: write system calls per 1,000 decisions (Redis commands, answers)',
        per1000(standalone.senderWrites),
        per1000(federated.senderWrites),
      ),
      row(
        '  wake-ups per 1,000 decisions (voluntary context switches)',
        per1000(standalone.senderWakeups),
        per1000(federated.senderWakeups),
      ),
      row("peers' services: write system calls per 1,000 decisions of the sender", undefined, per1000(federated.peerWrites), null),
      row('  wake-ups per 1,000 decisions of the sender', undefined, per1000(federated.peerWakeups), null),
      row("Redis commands/decision (sending region's, INFO commandstats)", standalone.commandsPerDecision, federated.commandsPerDecision),
      row('gossip bytes/decision, all links (JSON of the jobs sent)', 0, federated.gossipBytesPerDecision, null),
      row('gossip jobs sent per 1,000 decisions, all links', 0, per1000(federated.gossipJobsPerDecision), null),
      row('fast-lane keys sent per 1,000 decisions, all links', 0, per1000(federated.fastLaneKeysPerDecision), null),
      row('sending service: rule decisions limited, %', standalone.limitedShare * 100, federated.limitedShare * 100, null),
      row('  answered in process (over-limit cache), %', standalone.cachedShare * 100, federated.cachedShare * 100, null),
      row('false denials per 1,000 decisions, all regions', 0, per1000(federated.falseDenialsPerDecision), null),
      row('grants made per 1,000 decisions, all regions', 0, per1000(federated.grantsPerDecision), null),
      row('Redis bytes in/decision, all Redis', standalone.netInputPerDecision, federated.netInputPerDecision, null),
      row('  beyond standalone', 0, beyond, null),
      row('rule state keys when the load stopped (sending region)', standalone.stateKeys, federated.stateKeys, null),
      row('Redis used_memory B/state key, sending region (queue and bookkeeping in)', standalone.memoryPerKey, federated.memoryPerKey),
      row('Redis used_memory B/state key, peers (mean)', undefined, federated.peerMemoryPerKey, null),
      row('MEMORY USAGE B/state key (sending region, sample)', standalone.memoryUsage, federated.memoryUsage),
      row('idle federated region, Redis commands/s (busiest of the three, before any load)', undefined, federated.idleCommandsPerSec, null),
      row('idle federated region, CPU ms/s, service + Redis (busiest of the three)', undefined, federated.idleCpuMsPerSec, null),
      row('  its service: wake-ups/s (voluntary context switches), busiest of the three', undefined, federated.idleWakeupsPerSec, null),
      row('  its service: CPU µs per wake-up', undefined, federated.idleCpuPerWakeupUs, null),
      row('backlog left after the catch-up wait (keys)', undefined, federated.backlogLeft, null),
      row('sync lag p99 us-east → peers, ms (bucket bound, all keys)', undefined, federated.syncLagP99Ms, null),
      row(`p50 ms at a fixed ${standalone.halfRate}/s (half standalone saturation)`, standalone.halfP50Ms, federated.halfP50Ms),
      row(`p99 ms at a fixed ${standalone.halfRate}/s`, standalone.halfP99Ms, federated.halfP99Ms),
      row(
        "  limiter p99 ms at that rate (the service's quotafed_limiter_overhead_seconds)",
        standalone.halfLimiterP99Ms,
        federated.halfLimiterP99Ms,
      ),
      row('  requests parked by maxWaitMs at that rate', standalone.halfParked, federated.halfParked, null),
      row('  achieved /s at that rate', standalone.halfAchieved, federated.halfAchieved),
      row('  sending region CPU µs/decision at that rate (service + Redis)', standalone.halfSenderUs, federated.halfSenderUs),
      row('  whole federation CPU µs/decision at that rate', standalone.halfWholeUs, federated.halfWholeUs),
      row('answers other than 200, errors, timeouts (saturation)', standalone.non200, federated.non200, null),
    ],
    notes: [
      'CPU: utime + stime from /proc/<pid>/stat of each service process and redis-server over the saturation run (federated: and the ' +
        'wait for the peers to catch up after it), divided by the decisions answered; the rows "at that rate": over the fixed-rate rounds, without a catch-up wait. Memory, read as the load stops: used_memory beyond the empty region / rule ' +
        'state keys held then (SCAN), so the gossip queue, pending and watch sets count against the keys; MEMORY USAGE: key and ' +
        `value of up to ${MEMORY_SAMPLE_KEYS} state keys. A token bucket's key lives until it has refilled, so at large K a ` +
        'standalone region holds only the keys of the last moments and its per-key figure carries fixed overheads. ' +
        'autocannon reports latency in whole milliseconds and corrects for coordinated omission: a request parked by ' +
        'maxWaitMs (500 ms in regions/*.yaml) holds its connection, and the requests its schedule held back are recorded as ' +
        'having waited too (one 500 ms park at a fixed rate R over 8 connections adds about R/16 samples of up to 500 ms), ' +
        "so a few parks move the client's p99; the limiter p99 row counts each decision once, from the sending service's " +
        'own histogram (its buckets: 3, 4, 5, 7.5, 10 ms; interpolated inside one). ' +
        'Write system calls: syscw of /proc/<pid>/io of the service process ' +
        '(a command to Redis or an answer is one, unless pipelined); wake-ups: voluntary_ctxt_switches of its main thread ' +
        "(/proc/<pid>/status). On two loaded cores each costs the service far more than its own code: the peers' CPU follows them.",
    ],
  };
}

/**
 * The rate sweep: each side's CPU per decision at each offered rate, and what the federation costs beyond standalone
 * both per decision and per second. A cost per decision keeps its µs as the rate grows; one paid per second (sync
 * rounds, gossip jobs, idle work) keeps its ms/s, and its share of a decision shrinks as the rate grows.
 */
function sweepTable(bench: BenchCase, sweep: readonly SweepPoint[]): Table {
  const perDecision = (side: FixedRateCpu, micros: number) => (side.decisions > 0 ? micros / side.decisions : Number.NaN);
  const perSecond = (side: FixedRateCpu, micros: number) => (side.ms > 0 ? micros / side.ms : Number.NaN);
  return {
    id: `federation-sweep-${bench.id}`,
    title: `10d. Federation at scale, ${bench.label} keys: the cost as the rate grows (fixed offered rates)`,
    columns: [
      'offered/s',
      'achieved/s standalone / federated',
      'whole CPU µs/decision standalone',
      'federated',
      'federated / standalone',
      'beyond standalone, µs/decision',
      'beyond standalone, CPU ms/s',
      'sending region beyond standalone, CPU ms/s',
    ],
    rows: sweep.map(({ rate, standalone, federated }) => {
      const s = perDecision(standalone, standalone.micros);
      const f = perDecision(federated, federated.micros);
      return {
        'offered/s': rate,
        'achieved/s standalone / federated': `${Math.round((1000 * standalone.decisions) / standalone.ms)} / ${Math.round((1000 * federated.decisions) / federated.ms)}`,
        'whole CPU µs/decision standalone': round(s, 1),
        federated: round(f, 1),
        'federated / standalone': round(f / s, 2),
        'beyond standalone, µs/decision': round(f - s, 1),
        'beyond standalone, CPU ms/s': round(perSecond(federated, federated.micros) - perSecond(standalone, standalone.micros), 1),
        'sending region beyond standalone, CPU ms/s': round(
          perSecond(federated, federated.senderMicros) - perSecond(standalone, standalone.senderMicros),
          1,
        ),
      };
    }),
    notes: [
      `${FIXED_RATE_CONNECTIONS} connections at each offered rate, the sides alternating round by round as in the saturation phase. CPU: ` +
        'every service process and redis-server (/proc) over each round, the load process start-up included (idle ' +
        'time, counted on both sides alike); "achieved/s" over the same windows. ms/s: CPU per second of those windows.',
    ],
  };
}

interface Target {
  target: string;
  value: (s: SideFigures, f: SideFigures) => number | undefined;
  pass: (value: number, s: SideFigures, f: SideFigures) => boolean;
  show: (value: number, s: SideFigures, f: SideFigures) => string;
  /** The figure of one round, for a ratio target: the run's least and greatest paired ratio are shown beside it. */
  perRound?: (round: RoundFigures) => number;
  /** A target of the token bucket's alone (another `--algorithm` leaves it out). */
  tokenBucketOnly?: true;
}

const us = (value: number) => `${round(value, 1)} µs`;
const sender = (side: SideFigures) => side.senderServiceUs + side.senderRedisUs;

/** The issue's targets, each a same-run figure or ratio (the issue states the CPU and gossip ones at 1 M keys). */
const TARGETS: Target[] = [
  {
    target: 'whole federation CPU/decision <= 1.5x standalone',
    value: (s, f) => ratioOf(f.wholeUs, s.wholeUs),
    pass: (v) => v <= 1.5,
    show: (v, s, f) => `${v}x (${us(f.wholeUs)} vs ${us(s.wholeUs)})`,
    perRound: (r) => r.wholeUs,
  },
  {
    target: 'sending region CPU/decision <= 1.25x standalone',
    value: (s, f) => ratioOf(sender(f), sender(s)),
    pass: (v) => v <= 1.25,
    show: (v, s, f) => `${v}x (${us(sender(f))} vs ${us(sender(s))})`,
    perRound: (r) => r.senderUs,
  },
  {
    target: 'sending Redis commands/decision <= 1.5x standalone',
    value: (s, f) => ratioOf(f.commandsPerDecision, s.commandsPerDecision),
    pass: (v) => v <= 1.5,
    show: (v, s, f) => `${v}x (${round(f.commandsPerDecision, 2)} vs ${round(s.commandsPerDecision, 2)})`,
  },
  {
    target: 'idle federated region <= 100 Redis commands/s',
    value: (_s, f) => f.idleCommandsPerSec,
    pass: (v) => v <= 100,
    show: (v) => `${Math.round(v)}/s`,
  },
  {
    target: 'gossip bytes/decision, all links <= 24 B (stated at 1 M uniform keys)',
    value: (_s, f) => f.gossipBytesPerDecision,
    pass: (v) => v <= 24,
    show: (v) => `${round(v, 1)} B`,
  },
  {
    target: 'used_memory/key federated <= 1.5x standalone',
    value: (s, f) => ratioOf(f.memoryPerKey, s.memoryPerKey),
    pass: (v) => v <= 1.5,
    show: (v, s, f) => `${v}x (${Math.round(f.memoryPerKey)} vs ${Math.round(s.memoryPerKey)} B)`,
  },
  {
    target: 'standalone token bucket <= 100 B/key by MEMORY USAGE',
    tokenBucketOnly: true,
    value: (s) => s.memoryUsage,
    pass: (v) => v <= 100,
    show: (v) => `${Math.round(v)} B`,
  },
  {
    target: 'federated saturation >= 0.8x standalone',
    value: (s, f) => ratioOf(f.decisionsPerSec, s.decisionsPerSec),
    pass: (v) => v >= 0.8,
    show: (v, s, f) => `${v}x (${Math.round(f.decisionsPerSec)} vs ${Math.round(s.decisionsPerSec)}/s)`,
    perRound: (r) => r.decisionsPerSec,
  },
  {
    target: 'limiter p99 at half standalone saturation <= standalone + 1 ms and < 5 ms',
    value: (_s, f) => round(f.halfLimiterP99Ms, 2),
    pass: (v, s) => v <= s.halfLimiterP99Ms + 1 && v < 5,
    show: (v, s, f) =>
      `${v} ms vs ${round(s.halfLimiterP99Ms, 2)} ms at ${s.halfRate}/s (the client's p99: ${f.halfP99Ms} vs ${s.halfP99Ms} ms; ` +
      `${f.halfParked} request(s) parked by maxWaitMs)`,
  },
];

function targetRows(bench: BenchCase, standalone: SideFigures, federated: SideFigures): Row[] {
  return TARGETS.filter((target) => !target.tokenBucketOnly || bench.algorithm === 'tokenBucket').map((target) => {
    const value = target.value(standalone, federated);
    const measured = value === undefined || Number.isNaN(value) ? undefined : value;
    const spread = target.perRound && roundSpread(standalone.rounds, federated.rounds, target.perRound);
    const shown = measured === undefined ? 'not measured' : target.show(measured, standalone, federated);
    return {
      keys: bench.label,
      target: target.target,
      measured: withSpread(shown, spread),
      result: measured === undefined ? '–' : target.pass(measured, standalone, federated) ? 'PASS' : 'MISS',
    };
  });
}

function record(ctx: BenchContext, bench: BenchCase, side: string, figures: SideFigures): void {
  for (const [name, value] of Object.entries(figures))
    if (typeof value === 'number' && Number.isFinite(value)) ctx.figures[`federation.${bench.id}.${side}.${name}`] = value;
}

export const federationSection: Section = async (ctx) => {
  // Minutes of its own at full size: it runs only when asked for, so `npm run bench` keeps its time budget.
  if (!ctx.options.only.includes('federation')) {
    progress('federation: skipped (runs only when named: npm run bench -- --only federation)');
    return [];
  }
  const sizes = federationSizes(ctx.options.quick);
  const cases = casesOf(sizes);
  progress(
    `federation: ${cases.map((c) => c.label).join(', ')}; ${sizes.seconds} s per measured phase, ` +
      `about ${Math.round(cases.length * (6 * sizes.seconds + 40 + sizes.rates.length * (2 * sizes.seconds + 8)))} s or more`,
  );
  const tables: Table[] = [];
  const targets: Row[] = [];
  for (const [index, bench] of cases.entries()) {
    progress(`federation: case ${index + 1}/${cases.length}, ${bench.label}`);
    const { standalone, federated, sweep } = await measureCase(bench, sizes);
    record(ctx, bench, 'standalone', standalone);
    record(ctx, bench, 'federated', federated);
    const table = caseTable(bench, standalone, federated);
    process.stderr.write(
      `\n${table.rows.map((row) => `  ${row.measure}: ${row.standalone ?? '–'} → ${row.federated ?? '–'}`).join('\n')}\n`,
    );
    tables.push(table, commandTable(bench, standalone, federated));
    if (sweep.length > 0) tables.push(sweepTable(bench, sweep));
    targets.push(...targetRows(bench, standalone, federated));
  }
  tables.push({
    id: 'federation-targets',
    title: '10b. Federation at scale: targets (same-run ratios, federated vs standalone)',
    columns: ['keys', 'target', 'measured', 'result'],
    rows: targets,
    notes: [
      'The CPU targets are stated at 1 M keys (uniform and Zipf) and the gossip target at 1 M uniform keys; smaller key counts are ' +
        'shown against the same thresholds.',
      `Each side's saturation load ran in ${sizes.rounds} round(s) of ${round(roundSeconds(sizes), 1)} s on fresh keys, ` +
        "every bucket full at a key's first request: a short run measures a start, in which each hot key draws the peers' part of its " +
        'bucket (and draws it again after a pause between rounds). `--seconds 120 --rounds 2` measures two minutes of steady load ' +
        '(docs/performance.md, twenty-seventh pass).',
      '"rounds a-b": the least and the greatest ratio of one saturation round of each side, paired in the order they ran ' +
        "(back to back): how far a ratio moves from round to round within the run (this machine's drift, and what each round's " +
        'hot keys draw). A verdict whose rounds straddle its threshold is not settled by one run.',
    ],
  });
  return tables;
};

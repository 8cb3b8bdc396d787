// One run of one scenario: fresh state, services with the run's configs, the peer limiter, warm-up, then
// traffic and faults on one clock; afterwards convergence, sync lag and the summary.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveLeakageBudget } from '../src/protocol/index.ts';
import { createAnnotator } from './annotate.ts';
import { describeFault, runFaults } from './faults.ts';
import type { Lab } from './lab/federation.ts';
import { runLoad } from './loadgen.ts';
import { measureConvergence } from './measure/convergence.ts';
import { histogramNames, histogramQuantile, readHistogram, type HistogramBuckets } from './measure/prometheus.ts';
import { removalNotes } from './measure/removal.ts';
import { admissionsTimeline, summarize } from './measure/summarize.ts';
import { startUpstashPeer, type UpstashPeer } from './peer/upstash.ts';
import { planTraffic, removalsOf } from './traffic.ts';
import {
  REGIONS,
  RULE_PATHS,
  type ChaosFault,
  type Decision,
  type Policy,
  type RegionName,
  type RunResult,
  type ScenarioSpec,
} from './types.ts';

export interface RunOptions {
  seed: number;
  policy: Policy;
  /** Where the run's configs and service log go. */
  dir: string;
  concurrency?: number;
  progress?: (line: string) => void;
}

const TIMELINE_BIN_MS = 250;
const SYNC_LAG_METRIC = /sync_lag/i;

const WARMUP_ROUNDS = 8;

/** Every region ready (/readyz: Redis answers, breaker closed) before any traffic, or an error naming who is not. */
async function allReady(lab: Lab, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const pending = new Set<RegionName>(REGIONS);
  while (pending.size > 0) {
    for (const region of [...pending]) {
      const ok = await fetch(`${lab.serviceUrl(region)}/readyz`, { signal: AbortSignal.timeout(1_000) }).then(
        (response) => (response.body?.cancel(), response.ok),
        () => false,
      );
      if (ok) pending.delete(region);
    }
    if (pending.size === 0) return;
    if (Date.now() > deadline) throw new Error(`not ready after ${timeoutMs} ms: ${[...pending].join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Redis commands slower than 100 ms during the run (SLOWLOG), per region: tells a blocked Redis from a starved client. */
async function slowCommands(lab: Lab): Promise<string[]> {
  const found: string[] = [];
  for (const region of REGIONS) {
    const entries = (await lab.direct[region].slowlog('GET', 128).catch(() => [])) as Array<[number, number, number, string[]]>;
    const slow = entries.filter((entry) => entry[2] >= 100_000);
    if (slow.length === 0) continue;
    const worst = slow.reduce((a, b) => (b[2] > a[2] ? b : a));
    found.push(
      `${region}'s Redis ran ${slow.length} command(s) over 100 ms (worst ${Math.round(worst[2] / 1000)} ms: ` +
        `${worst[3].slice(0, 2).join(' ')})`,
    );
  }
  return found;
}

async function warmUp(lab: Lab, peer: UpstashPeer | undefined): Promise<void> {
  // First requests through freshly started, tsx-compiled services are slow (JIT, connections, script loads):
  // a few rounds on keys the run never uses keep that out of the measurement.
  const one = (region: RegionName, i: number) =>
    fetch(`${lab.serviceUrl(region)}/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiKey: `warmup-${region}-${i % 4}`,
        method: 'GET',
        path: RULE_PATHS[i % 2 ? 'window' : 'bucket'],
        ip: '10.0.0.1',
      }),
    }).then(
      (response) => response.body?.cancel(),
      () => undefined,
    );
  for (let round = 0; round < WARMUP_ROUNDS; round++) {
    await Promise.all([
      ...REGIONS.flatMap((region) => Array.from({ length: 8 }, (_, i) => one(region, round * 8 + i))),
      ...(peer ? REGIONS.map((region) => peer.limit(region, `warmup-${region}`).catch(() => undefined)) : []),
    ]);
  }
}

async function scrapeSyncLag(lab: Lab): Promise<RunResult['syncLagMs']> {
  let merged: HistogramBuckets = { buckets: new Map(), count: 0 };
  let metric: string | null = null;
  for (const region of REGIONS) {
    try {
      const response = await fetch(`${lab.serviceUrl(region)}/metrics`, {
        headers: { authorization: `Bearer ${lab.adminToken}` },
        signal: AbortSignal.timeout(2_000),
      });
      const text = await response.text();
      const name = histogramNames(text, SYNC_LAG_METRIC)[0];
      if (!name) continue;
      metric = name;
      merged = readHistogram(text, name, merged);
    } catch {
      // a region that is down has no page; the others still count
    }
  }
  const scale = metric?.endsWith('_seconds') ? 1_000 : 1;
  const at = (q: number) => {
    const value = histogramQuantile(merged, q);
    return value === null ? null : Math.round(value * scale * 10) / 10;
  };
  return { p50: at(0.5), p99: at(0.99), samples: merged.count, metric };
}

/** Regions untouched by a Redis or service fault decided at least 75% of their requests with Redis. */
function decidedByRedis(decisions: readonly Decision[], spec: ScenarioSpec): boolean {
  const faulted = new Set(
    spec.faults.flatMap((fault) =>
      fault.kind === 'redisDown' ||
      fault.kind === 'serviceDown' ||
      fault.kind === 'redisStall' ||
      fault.kind === 'redisSnapshotRestart' ||
      fault.kind === 'regionRemoved'
        ? [fault.region]
        : [],
    ),
  );
  return REGIONS.filter((region) => !faulted.has(region)).every((region) => {
    const answered = decisions.filter((d) => d.region === region && d.outcome !== 'error');
    // The over-limit cache and a local lease answer from what Redis decided; the rest are fail modes.
    const degraded = answered.filter(
      (d) => d.source !== undefined && d.source !== 'redis' && d.source !== 'cache' && d.source !== 'lease',
    ).length;
    return answered.length === 0 || degraded <= answered.length * 0.25;
  });
}

function topKeys(keys: readonly string[], count: number): string[] {
  const tally = new Map<string, number>();
  for (const key of keys) tally.set(key, (tally.get(key) ?? 0) + 1);
  return [...tally.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([key]) => key);
}

/**
 * Waits for the next window boundary when the current window has less than `needMs` left, so a run on
 * minute-long windows sees one window (the accuracy cases: a fresh key inside one window).
 */
async function alignToWindow(periodMs: number, needMs: number, progress: (line: string) => void): Promise<void> {
  const left = periodMs - (Date.now() % periodMs);
  if (left >= needMs + 500) return;
  progress(`  waiting ${(left / 1000).toFixed(1)} s for the next ${periodMs / 1000} s window to start`);
  await new Promise((resolve) => setTimeout(resolve, left + 50));
}

interface Flood {
  stop(): Promise<{ requests: number; answered: number; ms: number } | undefined>;
}

/** chaos/flood.ts in its own process against every region, until stop(). */
function startFlood(lab: Lab, connections: number): Flood {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(lab.root, 'chaos/flood.ts'),
      '--urls',
      REGIONS.map((region) => lab.serviceUrl(region)).join(','),
      '--connections',
      String(connections),
      '--paths',
      Object.values(RULE_PATHS).join(','),
    ],
    { cwd: lab.root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopping: ReturnType<Flood['stop']> | undefined;
  return {
    stop: () =>
      (stopping ??= (async () => {
        child.kill('SIGTERM');
        const done = await Promise.race([
          exited.then(() => true),
          new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5_000)),
        ]);
        if (!done) child.kill('SIGKILL');
        try {
          return JSON.parse(output.trim().split('\n').at(-1) ?? '') as { requests: number; answered: number; ms: number };
        } catch {
          return undefined;
        }
      })()),
  };
}

export async function runScenario(lab: Lab, spec: ScenarioSpec, options: RunOptions): Promise<RunResult> {
  const progress = options.progress ?? (() => undefined);
  const wallStart = Date.now();
  const notes: string[] = [];
  const policy = spec.policy ?? options.policy;

  await lab.resetState();
  if (spec.linkLatency) {
    await Promise.all(
      lab.network
        .links()
        .map((link) => lab.network.addLatency(link, spec.linkLatency!.latencyMs, spec.linkLatency!.jitterMs, 'baseline-latency')),
    );
  }
  await lab.startServices({
    syncIntervalMs: spec.syncIntervalMs,
    leakageBudget: spec.leakageBudget,
    policy,
    failOpen: spec.failOpen ?? false,
    productRedisDefaults: spec.productRedisDefaults ?? false,
    maxWaitMs: spec.maxWaitMs ?? 0,
    dir: options.dir,
  });
  const annotate = createAnnotator(lab.serviceUrl, lab.adminToken);
  annotate.scenario(spec.name);
  const peer = spec.peer
    ? await startUpstashPeer(
        REGIONS.map((region) => ({
          region,
          ownRedisUrl: lab.redisUrls[region],
          peerRedisUrls: REGIONS.filter((r) => r !== region).map((to) => lab.network.peerRedisUrl(region, to)),
        })),
        policy.windowLimit,
        policy.windowPeriodMs,
      )
    : undefined;

  let flood: Flood | undefined;
  try {
    await allReady(lab, 20_000);
    await Promise.all(REGIONS.map((region) => lab.direct[region].slowlog('RESET').catch(() => undefined)));
    await warmUp(lab, peer);
    if (spec.alignToWindow) await alignToWindow(Math.max(policy.windowPeriodMs, policy.bucketPeriodMs), spec.durationMs, progress);
    const plan = planTraffic(spec.traffic, spec.durationMs, options.seed, removalsOf(spec.faults));
    flood = spec.flood ? startFlood(lab, spec.flood.connections) : undefined;
    const watched = topKeys(
      plan.filter((p) => p.rule === 'window').map((p) => p.key),
      3,
    );
    const startPerf = performance.now();
    const startEpoch = performance.timeOrigin + startPerf;
    const convergence: Array<Promise<RunResult['convergenceMs'][number]>> = [];
    /** When each fault healed (ms after the start); a removal "heals" once the regions left run the new peer list. */
    const healedAt = new Map<ChaosFault, number>();

    const [load] = await Promise.all([
      runLoad({
        plan,
        serviceUrl: lab.serviceUrl,
        startEpochMs: startEpoch,
        startPerfMs: startPerf,
        windowPeriodMs: policy.windowPeriodMs,
        bucketPeriodMs: policy.bucketPeriodMs,
        concurrency: options.concurrency ?? 64,
        serial: spec.traffic.pattern?.kind === 'sequential' ? (spec.traffic.pattern.inFlight ?? 1) : undefined,
        peer,
        onProgress: (sent, total) =>
          progress(
            `  ${spec.name}: ${((performance.now() - startPerf) / 1000).toFixed(0)}/${spec.durationMs / 1000} s, ${sent}/${total} requests`,
          ),
      }),
      runFaults(lab, spec.faults, startPerf, {
        onStart: (fault, t) => {
          progress(`  ${spec.name}: ${(t / 1000).toFixed(1)} s ${describeFault(fault)} — start`);
          annotate.partition(fault, Date.now());
        },
        onHeal: (fault, t) => {
          progress(`  ${spec.name}: ${(t / 1000).toFixed(1)} s heal (${fault.kind})`);
          annotate.partition(null);
          healedAt.set(fault, t);
          // A removal never heals, and the regions left are indexed anew: measureConvergence's three-region rows
          // do not apply (the share notes below say what the change did).
          if (fault.kind === 'latency' || fault.kind === 'regionRemoved') return;
          convergence.push(
            measureConvergence(lab.direct, watched, 10_000).then(({ ms, behind }) => {
              if (ms === null) notes.push(`not converged 10 s after "${describeFault(fault)}" healed: ${behind.join('; ')}`);
              return { fault: describeFault(fault), healedAt: Math.round(t), ms };
            }),
          );
        },
        onError: (fault, error) => notes.push(`fault "${describeFault(fault)}" failed: ${error.message}`),
        onNote: (_fault, note) => notes.push(note),
      }),
    ]);
    const flooded = await flood?.stop();
    const convergenceMs = await Promise.all(convergence);
    // The raw trace, for anyone who wants to check a number by hand.
    writeFileSync(
      join(options.dir, 'decisions.ndjson'),
      [...load.quotafed.map((d) => ({ limiter: 'quotafed', ...d })), ...load.peer.map((d) => ({ limiter: 'upstash', ...d }))]
        .map((d) => JSON.stringify(d))
        .join('\n'),
    );
    const syncLagMs = await scrapeSyncLag(lab);
    notes.push(...(await slowCommands(lab)));

    // A rule reloaded mid-run in one region is judged against the tighter of its old and new limits: regions that
    // disagree on a rule decide it at the tighter terms (docs/federation.md §4); otherwise `bound` is the run's policy.
    const bound = boundPolicy(policy, spec.faults);
    if (bound !== policy)
      notes.push(
        `judged against the tighter of the old and new limits: window ${bound.windowLimit}, bucket ${bound.bucketLimit} per ` +
          `${bound.bucketPeriodMs / 1000} s (capacity ${bound.bucketBurst}); B is resolved from those limits`,
      );
    const quotafed = summarize(load.quotafed, bound);
    const peerResult = peer ? summarize(load.peer, bound, ['window']) : null;
    // B per rule, null for "unbounded"; a percentage budget is of the rule's `limit`, as the engine resolves it.
    const budget = {
      window: resolveLeakageBudget(bound.windowLimit, spec.leakageBudget, REGIONS.length),
      bucket: resolveLeakageBudget(bound.bucketLimit, spec.leakageBudget, REGIONS.length),
    };
    const judged = !spec.failOpen;
    const within = (rule: 'window' | 'bucket') => budget[rule] === null || (quotafed.leakage[rule]?.max ?? 0) <= budget[rule]!;
    const withinBudget = !judged || (within('window') && within('bucket'));
    annotate.leakage({
      leakage: quotafed.leakage.window?.max ?? 0,
      budget: budget.window,
      limit: bound.windowLimit,
      key: 'chaos-window (worst key)',
    });

    if (load.lateness.p99 > 250)
      notes.push(
        `the load generator ran late (p50 ${load.lateness.p50} ms, p99 ${load.lateness.p99} ms behind the plan): the machine was short ` +
          `of CPU, so the offered rate was lower than planned`,
      );
    if (load.delayed > plan.length * 0.01)
      notes.push(
        `${load.delayed} of ${plan.length} requests left later than planned (all ${options.concurrency ?? 64} slots ` +
          `busy): the machine was saturated`,
      );
    const degraded = new Map<string, number>();
    for (const d of load.quotafed)
      if (d.source && d.source !== 'redis' && d.source !== 'cache')
        degraded.set(`${d.region} ${d.source}`, (degraded.get(`${d.region} ${d.source}`) ?? 0) + 1);
    if (degraded.size > 0)
      notes.push(
        `decisions without Redis (breaker open or Redis timing out): ${[...degraded].map(([what, n]) => `${what} ×${n}`).join(', ')}`,
      );
    for (const fault of spec.faults) {
      if (fault.kind !== 'redisSnapshotRestart') continue;
      // What the restart took away: the region's admissions between the snapshot and the kill (by the
      // decisions' midpoints, so a request or two either side).
      const lost = (rule: 'window' | 'bucket') =>
        load.quotafed.filter(
          (d) => d.region === fault.region && d.rule === rule && d.outcome === 'admitted' && d.t >= fault.snapshotAt && d.t < fault.at,
        ).length;
      notes.push(
        `${fault.region} admitted ${lost('window')} (window rule) and ${lost('bucket')} (bucket rule) between the snapshot and the ` +
          'kill: the restart from the snapshot lost them',
      );
    }
    for (const fault of spec.faults) {
      if (fault.kind !== 'regionRemoved') continue;
      const changedAtMs = healedAt.get(fault);
      if (changedAtMs === undefined) continue; // the fault failed: its error is noted
      notes.push(
        ...removalNotes(load.quotafed, {
          region: fault.region,
          startEpochMs: startEpoch,
          changedAtMs,
          durationMs: spec.durationMs,
          windowLimit: bound.windowLimit,
          windowPeriodMs: bound.windowPeriodMs,
          budget: budget.window,
        }),
      );
    }
    const errors = load.quotafed.filter((d) => d.outcome === 'error').length;
    if (errors > 0) notes.push(`${errors} requests got no decision (service down, timed out or 5xx)`);
    if (!judged) notes.push('fail-open run: Redis loss is outside the leakage guarantee; reported, not judged');
    if (flooded)
      notes.push(
        `background load: ${flooded.requests} random-key requests on ${spec.flood!.connections} connections ` +
          `(${Math.round((flooded.answered * 1000) / Math.max(1, flooded.ms))} answered/s)`,
      );
    for (const rule of ['window', 'bucket'] as const) {
      const under = quotafed.underAdmission[rule];
      const admittedHere = load.quotafed.filter((d) => d.rule === rule && d.outcome === 'admitted').length;
      if (under)
        notes.push(
          `${rule} rule: the federation admitted ${admittedHere}; an exact global limiter on the same trace ${under.exactAdmitted}, of ` +
            `which the federation refused ${under.refused} (${under.percent.toFixed(1)}%)`,
        );
    }
    // Who answered the admissions (Redis, a local lease, a fail mode): local leases at work show here.
    const bySource = new Map<string, number>();
    for (const d of load.quotafed)
      if (d.outcome === 'admitted') bySource.set(d.source ?? 'unknown', (bySource.get(d.source ?? 'unknown') ?? 0) + 1);
    if (bySource.size > 1 || !bySource.has('redis'))
      notes.push(`admissions by source: ${[...bySource].map(([source, count]) => `${source} ${count}`).join(', ')}`);
    const valid = spec.degradedExpected === true || decidedByRedis(load.quotafed, spec);
    if (!valid)
      notes.push(
        'INVALID: a region no fault touched decided most requests without Redis; the numbers describe its fail mode, not the federation',
      );

    return {
      scenario: spec,
      seed: options.seed,
      startedAt: new Date(wallStart).toISOString(),
      wallMs: Date.now() - wallStart,
      budget,
      limits: { window: bound.windowLimit, bucket: bound.bucketBurst },
      policy: bound,
      quotafed,
      peer: peerResult,
      convergenceMs,
      syncLagMs,
      timeline: {
        binMs: TIMELINE_BIN_MS,
        bins: admissionsTimeline(
          load.quotafed.filter((d) => d.rule === 'window'),
          spec.durationMs,
          TIMELINE_BIN_MS,
        ),
        ...(peer ? { peerBins: admissionsTimeline(load.peer, spec.durationMs, TIMELINE_BIN_MS) } : {}),
      },
      lateness: load.lateness,
      valid,
      withinBudget,
      notes,
    };
  } finally {
    await flood?.stop();
    await lab.stopServices();
    await peer?.close();
  }
}

/**
 * The policy a run is judged against: the run's, with each limit lowered to the smallest a `ruleReload` fault puts
 * in force in one region (periods are the run's: a reload scenario changes limits only). While the regions disagree,
 * each decides the rule at the tighter terms (src/federation/rule-identity.ts `tightenRules`), so the federation
 * keeps the tighter config's L + B.
 *
 * @example
 * boundPolicy(DEFAULT_POLICY, spec.faults).windowLimit; // 300 when one region reloads 300 → 400
 */
export function boundPolicy(policy: Policy, faults: readonly ChaosFault[]): Policy {
  const reloads = faults.flatMap((fault) => (fault.kind === 'ruleReload' ? [fault.policy] : []));
  if (reloads.length === 0) return policy;
  const min = (field: 'windowLimit' | 'bucketLimit' | 'bucketBurst') => Math.min(policy[field], ...reloads.map((p) => p[field]));
  const bound = { ...policy, windowLimit: min('windowLimit'), bucketLimit: min('bucketLimit'), bucketBurst: min('bucketBurst') };
  const same =
    bound.windowLimit === policy.windowLimit && bound.bucketLimit === policy.bucketLimit && bound.bucketBurst === policy.bucketBurst;
  return same ? policy : bound;
}

export function runDir(base: string, index: number, spec: ScenarioSpec): string {
  return join(base, `${String(index).padStart(2, '0')}-${spec.name}`);
}

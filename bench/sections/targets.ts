// 7. The performance targets as ratios from this run, PASS or MISS. A target whose figures are missing (its
// section was skipped or failed) is listed as "not measured".
import { round, withSpread } from '../lib/stats.ts';
import type { Row, Table } from '../lib/table.ts';

interface Target {
  target: string;
  /**
   * The measured value: the figure `ratio` names (its per-round spread, `<ratio>.low` and `.high` from recordSpread,
   * shown beside it), or what `value` computes; undefined when its section did not run.
   */
  ratio?: string;
  value?: (f: Record<string, number>) => number | undefined;
  pass: (value: number) => boolean;
  show: (value: number, f: Record<string, number>) => string;
}

const fmt = (value: number, digits = 2) => String(round(value, digits));

const rps = (f: Record<string, number>, id: string) => Math.round(f[`http.${id}.rps`] ?? 0);
const cpu = (f: Record<string, number>, id: string, keys: number) =>
  (f[`engine.${id}.k${keys}.clientUs`] ?? NaN) + (f[`engine.${id}.k${keys}.redisUs`] ?? NaN);

/** The five performance targets (the number before each says which), each a ratio or figure from this run. */
const TARGETS: Target[] = [
  {
    target: '1. /v1/check >= 1.0x Hono + rate-limiter-flexible, same route and body, fresh API key per request',
    ratio: 'http.checkOverRlf',
    pass: (v) => v >= 1,
    show: (v, f) =>
      `${fmt(v)}x (${rps(f, 'check')} vs ${rps(f, 'rlf-check')} req/s; server CPU ${fmt(f['http.check.cpuUs'] ?? NaN, 0)} vs ` +
      `${fmt(f['http.rlf-check.cpuUs'] ?? NaN, 0)} µs/req)`,
  },
  {
    target: '1. /v1/check >= 1.3x Hono + rate-limiter-flexible, one hot key (1,000/min: mostly the deny path)',
    ratio: 'http.checkHotOverRlf',
    pass: (v) => v >= 1.3,
    show: (v, f) =>
      `${fmt(v)}x (${rps(f, 'check-hot')} vs ${rps(f, 'rlf-check-hot')} req/s; server CPU ${fmt(f['http.check-hot.cpuUs'] ?? NaN, 0)} vs ` +
      `${fmt(f['http.rlf-check-hot.cpuUs'] ?? NaN, 0)} µs/req)`,
  },
  {
    target: "1. Hono middleware >= 1.0x rate-limiter-flexible's middleware app, same route",
    ratio: 'http.middlewareOverRlf',
    pass: (v) => v >= 1,
    show: (v, f) => `${fmt(v)}x (${rps(f, 'middleware')} vs ${rps(f, 'rlf')} req/s)`,
  },
  {
    target: '1. gateway (GET forwarded to a local upstream) >= 0.9x a bare Hono proxy to the same upstream',
    ratio: 'http.gatewayOverProxy',
    pass: (v) => v >= 0.9,
    show: (v, f) =>
      `${fmt(v)}x (${rps(f, 'gateway')} vs ${rps(f, 'bare-proxy')} req/s; server CPU ${fmt(f['http.gateway.cpuUs'] ?? NaN, 0)} vs ` +
      `${fmt(f['http.bare-proxy.cpuUs'] ?? NaN, 0)} µs/req)`,
  },
  {
    target: '1. (stretch) /v1/check >= 0.85x the bare Hono handler',
    ratio: 'http.checkOverBare',
    pass: (v) => v >= 0.85,
    show: (v, f) => `${fmt(v)}x (${rps(f, 'check')} vs ${rps(f, 'bare-post')} req/s)`,
  },
  {
    target: '2. engine >= 1.5x rate-limiter-flexible decisions/s, 64 callers, one hot key',
    ratio: 'engine.ratio.fwOverRlf.k1',
    pass: (v) => v >= 1.5,
    show: (v, f) =>
      `${fmt(v)}x (${Math.round(f['engine.qf_fw.k1.saturation'] ?? 0)} vs ${Math.round(f['engine.rlf.k1.saturation'] ?? 0)}/s)`,
  },
  {
    target: '2. engine >= 1.2x rate-limiter-flexible decisions/s, 64 callers, 100,000 keys',
    ratio: 'engine.ratio.fwOverRlf.k100000',
    pass: (v) => v >= 1.2,
    show: (v, f) =>
      `${fmt(v)}x (${Math.round(f['engine.qf_fw.k100000.saturation'] ?? 0)} vs ${Math.round(f['engine.rlf.k100000.saturation'] ?? 0)}/s)`,
  },
  {
    target: '2. local leases: one hot key >= 3x rate-limiter-flexible decisions/s, 64 callers (rules[].lease)',
    ratio: 'engine.ratio.leaseOverRlf.k1',
    pass: (v) => v >= 3,
    show: (v, f) =>
      `${fmt(v)}x (${Math.round(f['engine.qf_fw_lease.k1.saturation'] ?? 0)} vs ${Math.round(f['engine.rlf.k1.saturation'] ?? 0)}/s)`,
  },
  {
    target: "2. client + Redis CPU µs per decision below rate-limiter-flexible's, one hot key (rlf / engine > 1)",
    value: (f) => f['engine.cpuRatio.rlfOverFw.k1'],
    pass: (v) => v > 1,
    show: (v, f) => `${fmt(v)} (${fmt(cpu(f, 'qf_fw', 1), 1)} µs vs ${fmt(cpu(f, 'rlf', 1), 1)} µs)`,
  },
  {
    target: "2. client + Redis CPU µs per decision below rate-limiter-flexible's, 100,000 keys (rlf / engine > 1)",
    value: (f) => f['engine.cpuRatio.rlfOverFw.k100000'],
    pass: (v) => v > 1,
    show: (v, f) => `${fmt(v)} (${fmt(cpu(f, 'qf_fw', 100_000), 1)} µs vs ${fmt(cpu(f, 'rlf', 100_000), 1)} µs)`,
  },
  {
    target: '3. limiter p99 <= 2 ms at half of saturation, in-process (engine decide, 100,000 keys)',
    value: (f) => f['engine.qf_fw.k100000.open50.p99'],
    pass: (v) => v <= 2,
    show: (v, f) => `${fmt(v, 2)} ms (rate-limiter-flexible at the same rate: ${fmt(f['engine.rlf.k100000.open50.p99'] ?? NaN, 2)} ms)`,
  },
  {
    target: '3. limiter p99 overhead <= 2 ms at half of saturation over HTTP (/v1/check p99 minus bare Hono p99, same rate)',
    value: (f) => f['http.p99OverheadHalf'],
    pass: (v) => v <= 2,
    show: (v) => `${fmt(v)} ms`,
  },
  {
    target: '4. at most one Redis round trip per decision: allow path',
    value: (f) => f['commands.allow.perDecision'],
    pass: (v) => v <= 1,
    show: (v) => `${fmt(v, 3)} round trips/decision`,
  },
  {
    target: '4. at most one Redis round trip per decision: 64 submitted together (batched)',
    value: (f) => f['commands.batched.perDecision'],
    pass: (v) => v <= 1,
    show: (v) => `${fmt(v, 3)} round trips/decision`,
  },
  {
    target: '4. at most one Redis round trip per decision: deny path (cache off)',
    value: (f) => f['commands.deny.perDecision'],
    pass: (v) => v <= 1,
    show: (v) => `${fmt(v, 3)} round trips/decision`,
  },
  {
    target: '4. no Redis command when the over-limit cache answers an abusive key',
    value: (f) => f['commands.cache.perDecision'],
    pass: (v) => v === 0,
    show: (v) => `${fmt(v, 3)} commands/decision`,
  },
  {
    target: '5. <= 100 B per token-bucket key by MEMORY USAGE, one region',
    value: (f) => f['memory.tokenBucket.region1.memoryUsage'],
    pass: (v) => v <= 100,
    show: (v, f) => `${fmt(v, 0)} B (used_memory ${fmt(f['memory.tokenBucket.region1.bytesPerKey'] ?? NaN, 0)} B per key)`,
  },
  {
    target: 'gossip grows with active keys, not requests (10x requests on the same 1,000 keys: bytes within 10%)',
    value: (f) => (f['gossip.k1000.r10.bytesToPeers'] ?? NaN) / (f['gossip.k1000.r1.bytesToPeers'] ?? NaN),
    pass: (v) => Math.abs(v - 1) <= 0.1,
    show: (v) => `${fmt(v)}x bytes for 10x requests`,
  },
];

export function targetsTable(figures: Record<string, number>): Table {
  const rows: Row[] = TARGETS.map((t) => {
    const value = t.ratio === undefined ? t.value?.(figures) : figures[t.ratio];
    if (value === undefined || Number.isNaN(value)) return { target: t.target, measured: 'not measured', result: '–' };
    const low = t.ratio === undefined ? undefined : figures[`${t.ratio}.low`];
    const high = t.ratio === undefined ? undefined : figures[`${t.ratio}.high`];
    const spread: [number, number] | undefined = low === undefined || high === undefined ? undefined : [low, high];
    return { target: t.target, measured: withSpread(t.show(value, figures), spread), result: t.pass(value) ? 'PASS' : 'MISS' };
  });
  const notes = [
    'The five performance targets (numbered), each a ratio or figure from this run: `npm run bench` (all sections) or `npm run bench -- ' +
      '--only commands,engine,http,memory` (the sections these targets come from). Where a target is missed, docs/performance.md says ' +
      'where the time goes, with profiles (`npx tsx bench/profile.ts check 5`), and what the next step is.',
    '"rounds a-b": the least and the greatest ratio of the rounds the median above is taken over (each pair measured back to ' +
      'back); a verdict whose rounds straddle its threshold is not settled by one run.',
  ];
  return { id: 'targets', title: '7. Targets (ratios from this run)', columns: ['target', 'measured', 'result'], rows, notes };
}

/** 8. What each knob buys, from figures measured in this run; "keep" when it helps. */
export function tuningTable(f: Record<string, number>): Table {
  const rows: Row[] = [];
  const add = (knob: string, measure: string, on: number | undefined, off: number | undefined, note: string) => {
    if (on === undefined || off === undefined) return;
    const ratio = on / off;
    rows.push({
      knob,
      measure,
      'with / without': round(ratio),
      verdict: ratio >= 1.05 ? 'keep (helps)' : ratio <= 0.95 ? 'hurts here' : 'no clear effect',
      note,
    });
  };
  add(
    'ioredis enableAutoPipelining (redis.autoPipelining)',
    'engine decisions/s, one hot key',
    f['engine.qf_fw.k1.saturation'],
    f['engine.qf_fw_noap.k1.saturation'],
    'batches one tick of decisions into one write',
  );
  add(
    'ioredis enableAutoPipelining (redis.autoPipelining)',
    'engine decisions/s, 100,000 keys',
    f['engine.qf_fw.k100000.saturation'],
    f['engine.qf_fw_noap.k100000.saturation'],
    '',
  );
  add(
    'over-limit cache',
    'engine decisions/s for an abusive key',
    f['engine.abusive.cache'],
    f['engine.abusive.nocache'],
    'denials answered in memory until the reset',
  );
  add('over-limit cache', 'gateway req/s for an abusive key', f['http.abusive.rps'], f['http.abusive-nocache.rps'], '');
  add(
    'node:cluster, 2 workers (src/ops/cluster-mode.ts)',
    '/v1/check req/s',
    f['http.check-cluster.rps'],
    f['http.check.rps'],
    'the load generator and Redis share the same 2 cores',
  );
  return {
    id: 'tuning',
    title: '8. What helps (measured in this run)',
    columns: ['knob', 'measure', 'with / without', 'verdict', 'note'],
    rows,
  };
}

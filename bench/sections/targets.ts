// 7. The targets as ratios from this run, PASS or MISS. A target whose figures are missing (its
// section was skipped or failed) is listed as "not measured".
import { round } from '../lib/stats.ts';
import type { Row, Table } from '../lib/table.ts';

interface Target {
  target: string;
  /** The measured value, or undefined when its section did not run. */
  value: (f: Record<string, number>) => number | undefined;
  pass: (value: number) => boolean;
  show: (value: number, f: Record<string, number>) => string;
}

const fmt = (value: number, digits = 2) => String(round(value, digits));

const TARGETS: Target[] = [
  {
    target: 'engine >= 1.5x rate-limiter-flexible decisions/s (one hot key)',
    value: (f) => f['engine.ratio.fwOverRlf.k1'],
    pass: (v) => v >= 1.5,
    show: (v, f) => `${fmt(v)}x (${Math.round(f['engine.qf_fw.k1.saturation'] ?? 0)} vs ${Math.round(f['engine.rlf.k1.saturation'] ?? 0)}/s)`,
  },
  {
    target: 'engine >= 1.5x rate-limiter-flexible decisions/s (100,000 keys)',
    value: (f) => f['engine.ratio.fwOverRlf.k100000'],
    pass: (v) => v >= 1.5,
    show: (v, f) => `${fmt(v)}x (${Math.round(f['engine.qf_fw.k100000.saturation'] ?? 0)} vs ${Math.round(f['engine.rlf.k100000.saturation'] ?? 0)}/s)`,
  },
  {
    target: '/v1/check >= 0.85x bare Hono req/s',
    value: (f) => f['http.checkOverBare'],
    pass: (v) => v >= 0.85,
    show: (v, f) => `${fmt(v)}x (${Math.round(f['http.check.rps'] ?? 0)} vs ${Math.round(f['http.bare-post.rps'] ?? 0)} req/s)`,
  },
  {
    target: 'limiter p99 <= 1 ms at half of saturation: engine decide, in-process, 100,000 keys',
    value: (f) => f['engine.qf_fw.k100000.open50.p99'],
    pass: (v) => v <= 1,
    show: (v) => `${fmt(v, 3)} ms`,
  },
  {
    target: 'limiter p99 overhead <= 1 ms at half of saturation: HTTP, /v1/check p99 minus bare Hono p99 at the same rate',
    value: (f) => f['http.p99OverheadHalf'],
    pass: (v) => v <= 1,
    show: (v) => `${fmt(v)} ms`,
  },
  {
    target: '<= 100 bytes per token-bucket key, one region (used_memory delta)',
    value: (f) => f['memory.tokenBucket.region1.bytesPerKey'],
    pass: (v) => v <= 100,
    show: (v, f) => `${fmt(v, 0)} B (MEMORY USAGE ${fmt(f['memory.tokenBucket.region1.memoryUsage'] ?? NaN, 0)} B; best layout measured ${fmt(f['memory.tokenBucket.bestAlternative.bytesPerKey'] ?? NaN, 0)} B)`,
  },
  {
    target: "abusive key's rejections from the over-limit cache >= 0.9x bare Hono req/s",
    value: (f) => f['http.abusiveOverBare'],
    pass: (v) => v >= 0.9,
    show: (v, f) => `${fmt(v)}x (${Math.round(f['http.abusive.rps'] ?? 0)} vs ${Math.round(f['http.bare-get-2.rps'] ?? 0)} req/s)`,
  },
  {
    target: 'one Redis round trip per decision on the allow path',
    value: (f) => f['commands.allow.perDecision'],
    pass: (v) => v === 1,
    show: (v) => `${fmt(v, 3)} round trips/decision`,
  },
  {
    target: 'one Redis round trip per decision on the deny path (cache off)',
    value: (f) => f['commands.deny.perDecision'],
    pass: (v) => v === 1,
    show: (v) => `${fmt(v, 3)} round trips/decision`,
  },
  {
    target: 'no Redis command when the over-limit cache answers',
    value: (f) => f['commands.cache.perDecision'],
    pass: (v) => v === 0,
    show: (v) => `${fmt(v, 3)} commands/decision`,
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
    const value = t.value(figures);
    if (value === undefined || Number.isNaN(value)) return { target: t.target, measured: 'not measured', result: '–' };
    return { target: t.target, measured: t.show(value, figures), result: t.pass(value) ? 'PASS' : 'MISS' };
  });
  return { id: 'targets', title: '7. Targets (ratios from this run)', columns: ['target', 'measured', 'result'], rows };
}

/** 8. What each knob buys, from figures measured in this run; "keep" when it helps. */
export function tuningTable(f: Record<string, number>): Table {
  const rows: Row[] = [];
  const add = (knob: string, measure: string, on: number | undefined, off: number | undefined, note: string) => {
    if (on === undefined || off === undefined) return;
    const ratio = on / off;
    rows.push({ knob, measure, 'with / without': round(ratio), verdict: ratio >= 1.05 ? 'keep (helps)' : ratio <= 0.95 ? 'hurts here' : 'no clear effect', note });
  };
  add('ioredis enableAutoPipelining (redis.autoPipelining)', 'engine decisions/s, one hot key', f['engine.qf_fw.k1.saturation'], f['engine.qf_fw_noap.k1.saturation'], 'batches one tick of decisions into one write');
  add('ioredis enableAutoPipelining (redis.autoPipelining)', 'engine decisions/s, 100,000 keys', f['engine.qf_fw.k100000.saturation'], f['engine.qf_fw_noap.k100000.saturation'], '');
  add('over-limit cache', 'engine decisions/s for an abusive key', f['engine.abusive.cache'], f['engine.abusive.nocache'], 'denials answered in memory until the reset');
  add('over-limit cache', 'gateway req/s for an abusive key', f['http.abusive.rps'], f['http.abusive-nocache.rps'], '');
  add('node:cluster, 2 workers (src/ops/cluster-mode.ts)', '/v1/check req/s', f['http.check-cluster.rps'], f['http.check.rps'], 'the load generator and Redis share the same 2 cores');
  return { id: 'tuning', title: '8. What helps (measured in this run)', columns: ['knob', 'measure', 'with / without', 'verdict', 'note'], rows };
}

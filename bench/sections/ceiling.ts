// 3. The ceiling: redis-benchmark against the same redis-server, PING and the decide script by SHA, next to
// the engine's own decisions/s from section 1. -P 1 is one request per round trip per connection (what a
// client without batching can reach); -P 16 pipelines and shows Redis's own CPU limit for the script.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { luaSource } from '../../src/store/commands.ts';
import { decideCall } from '../../src/store/decide-calls.ts';
import { decideLibrary } from '../../src/store/library.ts';
import { ALGORITHM_CODES } from '../../src/store/script-call.ts';
import { HIGH_LIMIT, type Section } from '../lib/context.ts';
import { progress } from '../lib/progress.ts';
import { round } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';

const run = promisify(execFile);

const RLF_SCRIPT = readFileSync(new URL('../../node_modules/rate-limiter-flexible/lib/RateLimiterRedis.js', import.meta.url), 'utf8');

/** rate-limiter-flexible's own script, read from the installed package so the comparison tracks its version. */
function flexibleScript(): string {
  const match = /const incrTtlLuaScript = `([\s\S]*?)`;/.exec(RLF_SCRIPT);
  if (!match) throw new Error('could not find incrTtlLuaScript in rate-limiter-flexible');
  return match[1]!.replace(/\\\n/g, '\n');
}

interface BenchmarkResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

async function redisBenchmark(port: number, requests: number, pipeline: number, args: string[]): Promise<BenchmarkResult> {
  const { stdout } = await run(
    'redis-benchmark',
    ['-p', String(port), '-n', String(requests), '-c', '50', '-P', String(pipeline), '-r', '100000', '--csv', ...args],
    { maxBuffer: 1 << 24 },
  );
  const lines = stdout.trim().split('\n');
  const header = lines[0]!.split(',').map((cell) => cell.replace(/"/g, ''));
  const values = lines[lines.length - 1]!.split(',').map((cell) => cell.replace(/"/g, ''));
  const field = (name: string) => Number(values[header.indexOf(name)]);
  return { rps: field('rps'), p50Ms: field('p50_latency_ms'), p99Ms: field('p99_latency_ms') };
}

export const ceilingSection: Section = async (ctx) => {
  const { admin, redisServer } = ctx;
  await admin.flushall();
  const decideSha = (await admin.script('LOAD', luaSource('decide'))) as string;
  const leanSha = (await admin.script(
    'LOAD',
    readFileSync(new URL('../alternatives/lean-fixed-window.lua', import.meta.url), 'utf8'),
  )) as string;
  const flexibleSha = (await admin.script('LOAD', flexibleScript())) as string;
  // KEYS: shard marker + one state key; ARGV: self 0, one region, weights "1", skew, one rule, Redis TIME; then the rule.
  const decideArgs = (code: string, key: string) => [
    'EVALSHA',
    decideSha,
    ...decideCall({
      fixedKeys: ['qf:{s1}:m'],
      ruleKeys: [key],
      rules: [{ head: [code, HIGH_LIMIT, 60_000, HIGH_LIMIT], budget: 0, leaseTtl: 30_000, shadow: 0 }],
      topology: { selfIndex: 0, unitsCsv: '1', maxClockSkewMs: 1000, horizonMs: 600 },
      regions: 1,
      cost: 1,
      leaseId: '',
      now: '',
    }).map(String),
  ];
  // The same decide as the engine sends it: FCALL of the library built from the same source.
  const library = decideLibrary();
  await admin.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
  const fcallArgs = (code: string, key: string) => ['FCALL', library.fn, ...decideArgs(code, key).slice(2)];
  const cases: { name: string; id: string; args: (keyed: boolean) => string[] }[] = [
    { name: 'PING', id: 'ping', args: () => ['PING'] },
    {
      name: 'decide.lua, fixed window (EVALSHA)',
      id: 'decide_fw',
      args: (many) => decideArgs(ALGORITHM_CODES.fixedWindow, many ? 'qf:{s1}:r:__rand_int__' : 'qf:{s1}:r:hot'),
    },
    {
      name: 'decide library, fixed window (FCALL, what the engine sends)',
      id: 'decide_fw_fcall',
      args: (many) => fcallArgs(ALGORITHM_CODES.fixedWindow, many ? 'qf:{s1}:f:__rand_int__' : 'qf:{s1}:f:hot'),
    },
    {
      name: 'decide.lua, token bucket (EVALSHA)',
      id: 'decide_tb',
      args: (many) => decideArgs(ALGORITHM_CODES.tokenBucket, many ? 'qf:{s1}:t:__rand_int__' : 'qf:{s1}:t:hot'),
    },
    {
      name: "rate-limiter-flexible's script (EVALSHA)",
      id: 'rlf',
      args: (many) => ['EVALSHA', flexibleSha, '1', many ? 'rlf:__rand_int__' : 'rlf:hot', '1', '60'],
    },
    {
      name: 'bench/alternatives/lean-fixed-window.lua (proposal)',
      id: 'lean_fw',
      args: (many) => ['EVALSHA', leanSha, '1', many ? 'qf:{s1}:l:__rand_int__' : 'qf:{s1}:l:hot', String(HIGH_LIMIT), '60000', '1'],
    },
  ];
  const rows: Row[] = [];
  const requests = ctx.options.quick ? 20_000 : 60_000;
  for (const keyed of [false, true]) {
    for (const item of cases) {
      if (item.id === 'ping' && keyed) continue;
      const row: Row = { command: item.name, keys: item.id === 'ping' ? '–' : keyed ? '100,000 (random)' : '1' };
      for (const pipeline of [1, 16]) {
        progress(`ceiling: redis-benchmark ${item.name}, ${row.keys} key(s), -P ${pipeline}`);
        const result = await redisBenchmark(redisServer.port, pipeline === 1 ? requests / 3 : requests, pipeline, item.args(keyed));
        row[`-P ${pipeline} ops/s`] = Math.round(result.rps);
        if (pipeline === 1) row['-P 1 p99 ms'] = result.p99Ms;
        ctx.figures[`ceiling.${item.id}.${keyed ? 'k100000' : 'k1'}.P${pipeline}`] = result.rps;
      }
      await admin.flushall();
      rows.push(row);
    }
  }
  const engineRows: Row[] = [];
  for (const [keys, suffix] of [
    [1, 'k1'],
    [100_000, 'k100000'],
  ] as const) {
    const engine = ctx.figures[`engine.qf_fw.${suffix}.saturation`];
    const ceilingP16 = ctx.figures[`ceiling.decide_fw.${suffix}.P16`];
    const ceilingP1 = ctx.figures[`ceiling.decide_fw.${suffix}.P1`];
    if (engine === undefined || ceilingP16 === undefined || ceilingP1 === undefined) continue;
    engineRows.push({
      keys,
      'engine fw decisions/s (section 1)': Math.round(engine),
      'redis-benchmark decide -P 1': Math.round(ceilingP1),
      'redis-benchmark decide -P 16': Math.round(ceilingP16),
      'engine / -P 16': round(engine / ceilingP16),
      'decide -P 16 / rlf script -P 16': round(ceilingP16 / ctx.figures[`ceiling.rlf.${suffix}.P16`]!),
      'lean fw -P 16 / decide -P 16': round(ctx.figures[`ceiling.lean_fw.${suffix}.P16`]! / ceilingP16),
      'decide FCALL / EVALSHA -P 16': round(ctx.figures[`ceiling.decide_fw_fcall.${suffix}.P16`]! / ceilingP16),
    });
  }
  return [
    {
      id: 'ceiling',
      title: '3. The ceiling: redis-benchmark (50 connections) on the same redis-server',
      columns: ['command', 'keys', '-P 1 ops/s', '-P 1 p99 ms', '-P 16 ops/s'],
      rows,
      notes: [
        'decide.lua is SCRIPT LOADed from luaSource("decide") and called by SHA with one rule (limit 1e9/min), with the engine\'s keys ' +
          'and arguments; the FCALL row calls the same source loaded as a Redis Functions library (src/store/library.ts decideLibrary), ' +
          'which is what the engine sends since the hot-path work.',
      ],
    },
    {
      id: 'ceiling-vs-engine',
      title: '3b. Engine against the ceiling (same run)',
      columns: [
        'keys',
        'engine fw decisions/s (section 1)',
        'redis-benchmark decide -P 1',
        'redis-benchmark decide -P 16',
        'engine / -P 16',
        'decide -P 16 / rlf script -P 16',
        'lean fw -P 16 / decide -P 16',
        'decide FCALL / EVALSHA -P 16',
      ],
      rows: engineRows,
    },
  ];
};

// `npx tsx bench/match-rules.ts`: CPU per call of the decision path's identity work, in-process, no Redis:
// matchRules for a fresh API key (a miss of the identity cache: two SHA-256 and a state key) and for a hot one
// (a hit), with us-east's rules in one region; and the two digests of a fresh identity as src/keys.ts takes them
// (text output) beside the Buffer output they replaced (same bytes). Median of 5 rounds of 200,000 calls.
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { parseConfig } from '../src/config/load.ts';
import { matchRules } from '../src/engine/rules.ts';
import { identityHash, shardOf } from '../src/keys.ts';
import { median } from './lib/stats.ts';
import { renderTable } from './lib/table.ts';

const raw = parse(readFileSync(new URL('../regions/us-east.yaml', import.meta.url), 'utf8')) as Record<string, unknown>;
delete raw.federation;
const config = parseConfig(raw);
const CALLS = 200_000;
let round = 0;

function microsPerCall(run: (i: number) => unknown): number {
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) run(i);
  return ((performance.now() - started) * 1000) / CALLS;
}

const cases: Record<string, (i: number) => unknown> = {
  'matchRules, fresh API key': (i) => matchRules(config, { apiKey: `fresh-${round}-${i}`, ip: '10.0.0.1', method: 'GET', path: '/items' }),
  'matchRules, one hot API key': () => matchRules(config, { apiKey: 'hot', ip: '10.0.0.1', method: 'GET', path: '/items' }),
  'shardOf + identityHash (text digests, src/keys.ts)': (i) => {
    shardOf(`fresh-${round}-${i}`);
    return identityHash('per-key', [`fresh-${round}-${i}`]);
  },
  'the same two digests as Buffers (before)': (i) => {
    hash('sha256', `fresh-${round}-${i}`, 'buffer').readUInt32BE(0);
    return hash('sha256', `7:per-key|${`fresh-${round}-${i}`.length}:fresh-${round}-${i}`, 'buffer')
      .subarray(0, 12)
      .toString('base64url');
  },
};
const samples: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
for (round = 0; round < 5; round++) {
  for (const [name, run] of Object.entries(cases)) samples[name]!.push(microsPerCall(run));
}
console.log(
  renderTable({
    id: 'match-rules',
    title: 'Identity work per call (µs, median of 5 rounds of 200,000 calls)',
    columns: ['case', 'µs per call'],
    rows: Object.entries(samples).map(([name, values]) => ({ case: name, 'µs per call': median(values) })),
  }),
);

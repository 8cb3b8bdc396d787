// The simulation's accuracy rows over many seeds: `npx tsx bench/sim-seeds.ts [first seed] [seeds] [filter]`.
// The accuracy table (test/federation/simulation-accuracy.test.ts) runs seeds 1–3; the simulation draws traffic and
// link jitter from one random stream, so any protocol change that sends one message more or less also changes the
// traffic of every run after it, and a row's worst window moves by a point or more with no protocol reason. Compare
// two versions of the protocol on the same many seeds (a worktree of the other commit runs the same command): per
// row the worst window and the mean over all seeds' windows, the seeds whose worst window is below the row's
// target, and the messages sent.
import { simulate } from '../test/support/simulation/index.ts';
import { BURSTS, STEADY, overallRatio, runBurst, steady, windowRatios } from '../test/support/federation-traffic.ts';

const first = Number(process.argv[2] ?? 1);
const count = Number(process.argv[3] ?? 24);
const filter = new RegExp(process.argv[4] ?? '.', 'i');
const seeds = Array.from({ length: count }, (_, i) => first + i);
const ALGORITHMS = ['fixedWindow', 'slidingWindow', 'tokenBucket'] as const;

interface Row {
  name: string;
  target: number;
  /** Per seed: its worst ratio (steady rows: the worst full window) and every ratio it had. */
  run(seed: number): { worst: number; ratios: number[]; messages: number };
}

const rows: Row[] = [];
for (const algorithm of ALGORITHMS) {
  for (const test of STEADY) {
    rows.push({
      name: `${algorithm} ${test.name} ${test.ratePerSec}/s`,
      target: 0.97,
      run(seed) {
        const result = simulate(steady(test, algorithm), seed);
        const ratios = windowRatios(result);
        return { worst: Math.min(...ratios), ratios, messages: result.stats.messagesSent };
      },
    });
  }
  for (const test of BURSTS) {
    rows.push({
      name: `${algorithm} ${test.name}`,
      target: test.target(algorithm),
      run(seed) {
        const result = runBurst(test, algorithm, seed);
        const ratio = overallRatio(result);
        return { worst: ratio, ratios: [ratio], messages: result.stats.messagesSent };
      },
    });
  }
}

const percent = (value: number) => `${(100 * value).toFixed(1)}%`;
console.log(`seeds ${first}–${first + count - 1}\n`);
console.log('| row | target | worst | mean | seeds below target | messages |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const row of rows.filter((candidate) => filter.test(candidate.name))) {
  let worst = Number.POSITIVE_INFINITY;
  let sum = 0;
  let windows = 0;
  let below = 0;
  let messages = 0;
  for (const seed of seeds) {
    const outcome = row.run(seed);
    worst = Math.min(worst, outcome.worst);
    for (const ratio of outcome.ratios) {
      sum += ratio;
      windows++;
    }
    if (outcome.worst < row.target) below++;
    messages += outcome.messages;
  }
  console.log(
    `| ${row.name} | ${percent(row.target)} | ${percent(worst)} | ${percent(sum / windows)} | ${below} of ${count} | ${messages.toLocaleString('en-US')} |`,
  );
}

// The report: JSON with everything measured, and a Markdown page with the tables and SVG charts beside it.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeFault } from '../faults.ts';
import { budgetLabel, SWEEP_BUDGETS } from '../scenarios.ts';
import { REGIONS, type RunResult } from '../types.ts';
import { lineChart, PALETTE, timelineChart, type Series } from './svg.ts';
import { markdownTable, resultsMarkdown } from './tables.ts';

export interface ReportInput {
  runs: readonly RunResult[];
  command: string;
  seed: number;
  wallMs: number;
  machine: string;
  toxiproxy: string;
}

function sweepRuns(runs: readonly RunResult[], axis: 'syncInterval' | 'latency'): RunResult[] {
  return runs.filter((run) => run.scenario.sweep?.axis === axis);
}

function sweepSeries(runs: readonly RunResult[], pick: (run: RunResult) => number): Series[] {
  return SWEEP_BUDGETS.map((budget, i) => ({
    name: `budget ${budgetLabel(budget)}`,
    color: PALETTE[i % PALETTE.length]!,
    dashed: budget === 'unbounded',
    // An invalid run (a region decided without Redis) measured the fail mode: it is not a point on the curve.
    points: runs
      .filter((run) => run.valid && budgetLabel(run.scenario.leakageBudget) === budgetLabel(budget))
      .map((run) => [run.scenario.sweep!.x, pick(run)] as const)
      .sort((a, b) => a[0] - b[0]),
  })).filter((series) => series.points.length > 0);
}

const leakPercent = (run: RunResult) => run.quotafed.leakage.window?.percent ?? 0;
const underPercent = (run: RunResult) => run.quotafed.underAdmission.window?.percent ?? 0;

function sweepTable(runs: readonly RunResult[], axisLabel: string): string {
  const xs = [...new Set(runs.map((run) => run.scenario.sweep!.x))].sort((a, b) => a - b);
  const budgets = SWEEP_BUDGETS.filter((budget) => runs.some((run) => budgetLabel(run.scenario.leakageBudget) === budgetLabel(budget)));
  const header = [axisLabel, ...budgets.map((b) => `budget ${budgetLabel(b)}: leak / under`)];
  const rows = xs.map((x) => [
    String(x),
    ...budgets.map((budget) => {
      const run = runs.find((r) => r.scenario.sweep!.x === x && budgetLabel(r.scenario.leakageBudget) === budgetLabel(budget));
      if (!run) return '—';
      return run.valid ? `${leakPercent(run).toFixed(1)}% / ${underPercent(run).toFixed(1)}%` : 'invalid';
    }),
  ]);
  return markdownTable(header, rows);
}

function timelineSvg(run: RunResult): string {
  const series: Series[] = REGIONS.map((region, i) => ({
    name: `quotafed ${region}`,
    color: PALETTE[i]!,
    points: run.timeline.bins[region].map((count, index) => [index, count] as const),
  }));
  const total = (bins: Record<string, number[]>) =>
    bins[REGIONS[0]]!.map((_, index) => [index, REGIONS.reduce((sum, r) => sum + bins[r]![index]!, 0)] as const);
  series.push({ name: 'quotafed total', color: '#000', points: total(run.timeline.bins) });
  if (run.timeline.peerBins) series.push({ name: 'Upstash total', color: '#888', dashed: true, points: total(run.timeline.peerBins) });
  const steady = (run.limits.window * run.timeline.binMs) / run.policy.windowPeriodMs;
  return timelineChart({
    title: `${run.scenario.name}: window-rule admissions per ${run.timeline.binMs} ms`,
    binMs: run.timeline.binMs,
    yLabel: 'admitted requests',
    references: [{ y: steady, label: 'limit, spread evenly', color: '#555' }],
    series,
    // A removed region has no heal: shaded to the end of the run.
    shades: run.scenario.faults.map((fault) => ({
      fromMs: fault.at,
      toMs: 'until' in fault ? fault.until : run.scenario.durationMs,
      label: fault.kind,
    })),
  });
}

export function writeReport(dir: string, input: ReportInput): { markdown: string; json: string } {
  mkdirSync(dir, { recursive: true });
  const json = join(dir, 'report.json');
  writeFileSync(json, JSON.stringify(input, null, 2));

  const scenarioRuns = input.runs.filter((run) => !run.scenario.sweep);
  const lines: string[] = [
    '# quotafed chaos report',
    '',
    `Command: \`${input.command}\` · seed ${input.seed} · ${(input.wallMs / 1000).toFixed(0)} s wall time · ${input.machine} · ` +
      `Toxiproxy: ${input.toxiproxy}`,
    '',
    'Leakage = admitted beyond the policy for one key (window rule: per window; bucket rule: over any interval, beyond capacity + rate × ' +
      'T), as requests and % of the limit.',
    'Under-admission = requests an exact single global limiter, replaying the merged trace, admitted and the federation refused (% of ' +
      "the exact limiter's admissions).",
    'Upstash runs `MultiRegionRatelimit.fixedWindow` with the same limit and window on the same traffic, through the same links (it has ' +
      'no multi-region token bucket).',
    '',
  ];
  if (scenarioRuns.length > 0) {
    lines.push('## Scenarios', '', resultsMarkdown(scenarioRuns), '');
    for (const run of scenarioRuns) {
      const file = `timeline-${run.scenario.name}.svg`;
      writeFileSync(join(dir, file), timelineSvg(run));
      lines.push(`### ${run.scenario.name}`, '', `${run.scenario.description}.`, '');
      if (run.scenario.faults.length) lines.push(`Faults: ${run.scenario.faults.map(describeFault).join('; ')}.`, '');
      lines.push(`![admissions over time in ${run.scenario.name}](${file})`, '');
      for (const note of run.notes) lines.push(`- ${note}`);
      if (run.notes.length) lines.push('');
    }
  }
  for (const [axis, label, unit] of [
    ['syncInterval', 'sync interval', 'ms'],
    ['latency', 'link latency (one way)', 'ms'],
  ] as const) {
    const runs = sweepRuns(input.runs, axis);
    if (runs.length === 0) continue;
    const slug = axis === 'syncInterval' ? 'sync' : 'latency';
    writeFileSync(
      join(dir, `sweep-${slug}-leakage.svg`),
      lineChart({
        title: `Leakage (window rule) vs ${label}`,
        xLabel: `${label} (${unit})`,
        yLabel: 'worst window: % of limit over',
        series: sweepSeries(runs, leakPercent),
        xLog: axis === 'syncInterval',
        references: [
          { y: 5, label: 'budget 5%', color: '#2ca02c' },
          { y: 1, label: 'budget 1%', color: '#d62728' },
        ],
      }),
    );
    writeFileSync(
      join(dir, `sweep-${slug}-under.svg`),
      lineChart({
        title: `Under-admission (window rule) vs ${label}`,
        xLabel: `${label} (${unit})`,
        yLabel: '% of exact admissions refused',
        series: sweepSeries(runs, underPercent),
        xLog: axis === 'syncInterval',
      }),
    );
    lines.push(
      `## Sweep: ${label}`,
      '',
      `![leakage vs ${label}](sweep-${slug}-leakage.svg)`,
      '',
      `![under-admission vs ${label}](sweep-${slug}-under.svg)`,
      '',
      sweepTable(runs, `${label} (${unit})`),
      '',
      '<details><summary>every run</summary>',
      '',
      resultsMarkdown(runs),
      '',
      '</details>',
      '',
    );
  }
  const markdown = join(dir, 'report.md');
  writeFileSync(markdown, lines.join('\n'));
  return { markdown, json };
}

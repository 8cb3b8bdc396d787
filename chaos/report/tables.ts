// The result tables: one row per run, as Markdown (report, docs) and as aligned text (terminal).
import { budgetLabel } from '../scenarios.ts';
import type { LeakageResult, RunResult, UnderAdmission } from '../types.ts';

export const COLUMNS = [
  'scenario',
  'budget',
  'leak window',
  'leak bucket',
  'under-adm. window / bucket',
  '429 rate',
  'convergence',
  'sync lag p50 / p99',
  'Upstash leak window',
  'Upstash under-adm.',
  'load late p99',
  'verdict',
] as const;

function leak(result: LeakageResult | null | undefined): string {
  if (!result) return '—';
  return `${result.max} (${result.percent.toFixed(1)}%)`;
}

function under(result: UnderAdmission | null | undefined): string {
  return result ? `${result.percent.toFixed(1)}%` : '—';
}

function ms(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : `${Math.round(value)} ms`;
}

export function budgetCell(run: RunResult): string {
  const label = budgetLabel(run.scenario.leakageBudget);
  return run.budget.window === null ? label : `${label} (${run.budget.window})`;
}

export function verdict(run: RunResult): string {
  if (!run.valid) return 'INVALID';
  if (run.scenario.failOpen) return 'not judged';
  if (run.budget.window === null) return 'no bound';
  return run.withinBudget ? 'within budget' : 'OVER BUDGET';
}

export function row(run: RunResult): string[] {
  const convergence = run.convergenceMs.length === 0 ? '—' : run.convergenceMs.map((c) => (c.ms === null ? '>10 s' : ms(c.ms))).join(', ');
  return [
    run.scenario.name,
    budgetCell(run),
    leak(run.quotafed.leakage.window),
    leak(run.quotafed.leakage.bucket),
    `${under(run.quotafed.underAdmission.window)} / ${under(run.quotafed.underAdmission.bucket)}`,
    `${run.quotafed.rate429.toFixed(1)}%`,
    convergence,
    run.syncLagMs.p50 === null ? '—' : `${ms(run.syncLagMs.p50)} / ${ms(run.syncLagMs.p99)}`,
    run.peer ? leak(run.peer.leakage.window) : '—',
    run.peer ? under(run.peer.underAdmission.window) : '—',
    ms(run.lateness?.p99),
    verdict(run),
  ];
}

export function markdownTable(header: readonly string[], rows: readonly string[][]): string {
  const line = (cells: readonly string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export function textTable(header: readonly string[], rows: readonly string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function resultsMarkdown(runs: readonly RunResult[]): string {
  return markdownTable(COLUMNS, runs.map(row));
}

export function resultsText(runs: readonly RunResult[]): string {
  return textTable(COLUMNS, runs.map(row));
}

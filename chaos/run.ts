// `npm run chaos -- --scenario <name>[,<name>…] | --all | --sweep [--quick] [--seed N] [--no-peer] [--list]`
// Starts the lab once, runs each scenario on it, prints a table and writes reports/chaos/<stamp>/.
import { cpus } from 'node:os';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runDir, runScenario } from './experiment.ts';
import { startLab } from './lab/federation.ts';
import { writeReport, type ReportInput } from './report/markdown.ts';
import { resultsText } from './report/tables.ts';
import { scenarios, sweep } from './scenarios.ts';
import { DEFAULT_POLICY, type RunResult, type ScenarioSpec } from './types.ts';

const USAGE = `Usage: npm run chaos -- [options]

  --scenario <names>   run these scenarios (comma-separated); see --list
  --all                every scenario, then the sweeps
  --sweep              only the sweeps (sync interval and link latency × budget)
  --quick              shorter runs
  --seed <n>           traffic seed (default 1); the same seed sends the same requests
  --no-peer            skip Upstash's MultiRegionRatelimit
  --out <dir>          report directory (default reports/chaos/<timestamp>)
  --list               list the scenarios and exit
  --render <json>      write report.md and the charts again from a report.json (no runs)

Set TOXIPROXY_URL to use a running Toxiproxy server instead of quotafed's own.`;

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  process.exit(2);
}

async function main(): Promise<number> {
  // biome-ignore lint/suspicious/noImplicitAnyLet: typed by the parseArgs destructuring below
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        scenario: { type: 'string', multiple: true },
        all: { type: 'boolean' },
        sweep: { type: 'boolean' },
        quick: { type: 'boolean' },
        seed: { type: 'string', default: '1' },
        'no-peer': { type: 'boolean' },
        out: { type: 'string' },
        list: { type: 'boolean' },
        render: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    fail((error as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.render) {
    const input = JSON.parse(readFileSync(values.render, 'utf8')) as ReportInput;
    const report = writeReport(dirname(resolve(values.render)), input);
    process.stdout.write(`report: ${relative(process.cwd(), report.markdown)}\n`);
    return 0;
  }
  const options = { quick: values.quick ?? false, peer: !values['no-peer'] };
  const catalogue = scenarios(options);
  if (values.list) {
    for (const spec of catalogue) process.stdout.write(`${spec.name.padEnd(22)} ${spec.description}\n`);
    process.stdout.write(`(--sweep: ${sweep(options).length} runs)\n`);
    return 0;
  }
  const seed = Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) fail(`--seed must be a non-negative integer, got ${values.seed}`);

  const selected: ScenarioSpec[] = [];
  if (values.all) selected.push(...catalogue);
  const sweepRuns = sweep(options);
  for (const name of (values.scenario ?? []).flatMap((list) => list.split(','))) {
    const spec = [...catalogue, ...sweepRuns].find((s) => s.name === name.trim());
    if (!spec) fail(`unknown scenario "${name}"; known: ${catalogue.map((s) => s.name).join(', ')}`);
    if (!selected.includes(spec)) selected.push(spec);
  }
  if (values.all || values.sweep) selected.push(...sweepRuns.filter((spec) => !selected.includes(spec)));
  if (selected.length === 0) fail('nothing to run: give --scenario <name>, --all or --sweep');

  const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  const outDir = resolve(values.out ?? join(root, 'reports/chaos', stamp));
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const started = Date.now();
  log(
    `chaos lab: ${selected.length} run(s), seed ${seed}${options.quick ? ', quick' : ''}; report in ` +
      `${relative(process.cwd(), outDir) || '.'}`,
  );

  const lab = await startLab({ root, toxiproxyUrl: process.env.TOXIPROXY_URL, progress: (line) => log(`lab: ${line}`) });
  let interrupted = false;
  const stop = () => {
    interrupted = true;
    log('interrupted: stopping the lab …');
    lab.close().finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);

  const runs: RunResult[] = [];
  try {
    for (const [index, spec] of selected.entries()) {
      if (interrupted) break;
      log(`[${index + 1}/${selected.length}] ${spec.name}: ${spec.description}`);
      try {
        const run = await runScenario(lab, spec, {
          seed,
          policy: DEFAULT_POLICY,
          dir: join(root, '.chaos', stamp, runDir('', index, spec)),
          progress: log,
        });
        runs.push(run);
        const q = run.quotafed;
        log(
          `  → leak window ${q.leakage.window?.max ?? 0}, bucket ${q.leakage.bucket?.max ?? 0} (budget ` +
            `${run.budget.window ?? 'unbounded'}); ` +
            `429 ${q.rate429.toFixed(1)}%; under window ${q.underAdmission.window?.percent.toFixed(1) ?? '—'}%, bucket ` +
            `${q.underAdmission.bucket?.percent.toFixed(1) ?? '—'}%` +
            (run.peer ? `; Upstash leak ${run.peer.leakage.window?.max ?? 0}` : '') +
            ` [${(run.wallMs / 1000).toFixed(1)} s]`,
        );
      } catch (error) {
        log(`  ✗ ${spec.name} failed: ${(error as Error).stack ?? String(error)}`);
      }
    }
  } finally {
    await lab.close();
  }

  const wallMs = Date.now() - started;
  const report = writeReport(outDir, {
    runs,
    command: `npm run chaos -- ${process.argv.slice(2).join(' ')}`.trim(),
    seed,
    wallMs,
    machine: `${cpus().length} CPU ${cpus()[0]?.model ?? ''}`.trim(),
    toxiproxy: process.env.TOXIPROXY_URL ? `external (${process.env.TOXIPROXY_URL})` : "quotafed's own server",
  });
  const scenarioRuns = runs.filter((run) => !run.scenario.sweep);
  log('');
  if (scenarioRuns.length) log(resultsText(scenarioRuns));
  if (runs.length > scenarioRuns.length) log(`\n${runs.length - scenarioRuns.length} sweep runs: see the report`);
  log(
    `\nreport: ${relative(process.cwd(), report.markdown)} (json: ${relative(process.cwd(), report.json)}); ` +
      `${(wallMs / 1000).toFixed(0)} s`,
  );
  const over = runs.filter((run) => !run.withinBudget);
  const invalid = runs.filter((run) => !run.valid);
  const failed = selected.length - runs.length;
  if (over.length) log(`OVER BUDGET: ${over.map((run) => run.scenario.name).join(', ')}`);
  if (invalid.length) log(`INVALID (decided without Redis): ${invalid.map((run) => run.scenario.name).join(', ')}`);
  if (failed) log(`${failed} run(s) failed to complete`);
  return over.length || invalid.length || failed ? 1 : 0;
}

process.exitCode = await main();

// `npm run bench` (about 5 minutes) or `npm run bench -- --quick` (about 1 minute).
// `--only engine,http` runs some sections. Tables go to stdout, progress to stderr, and the results to
// reports/bench/results.json and reports/bench/results.md (git-ignored).
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis } from '../src/ops/redis-process.ts';
import { tuneV8 } from '../src/v8-tuning.ts';
import { newClient, type BenchContext, type BenchOptions, type Section } from './lib/context.ts';
import { elapsedSeconds, progress } from './lib/progress.ts';
import { renderTable, type Table } from './lib/table.ts';
import { alternativesSection } from './sections/alternatives.ts';
import { ceilingSection } from './sections/ceiling.ts';
import { commandsSection } from './sections/commands.ts';
import { engineSection } from './sections/engine.ts';
import { featuresSection } from './sections/features.ts';
import { federationSection } from './sections/federation.ts';
import { gossipSection } from './sections/gossip.ts';
import { grpcSection } from './sections/grpc.ts';
import { httpSection } from './sections/http.ts';
import { memorySection } from './sections/memory.ts';
import { targetsTable, tuningTable } from './sections/targets.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

const SECTIONS: [string, Section][] = [
  ['commands', commandsSection],
  ['engine', engineSection],
  ['http', httpSection],
  ['memory', memorySection],
  ['gossip', gossipSection],
  ['ceiling', ceilingSection],
  ['alternatives', alternativesSection],
  ['grpc', grpcSection],
  ['features', featuresSection],
  ['federation', federationSection],
];

function parseArgs(argv: readonly string[]): BenchOptions & { out: string } {
  const onlyIndex = argv.indexOf('--only');
  const outIndex = argv.indexOf('--out');
  return {
    quick: argv.includes('--quick'),
    only: onlyIndex === -1 ? [] : (argv[onlyIndex + 1] ?? '').split(',').filter(Boolean),
    out: outIndex === -1 ? join(ROOT, 'reports', 'bench') : argv[outIndex + 1]!,
  };
}

async function main(): Promise<void> {
  // The in-process rows (engine, commands, memory) decide in this process, which starts as the README says one that
  // decides in-process should (tuneV8: V8's allocation-site pretenuring off); rate-limiter-flexible shares it.
  tuneV8();
  const options = parseArgs(process.argv.slice(2));
  const unknown = options.only.filter((name) => !SECTIONS.some(([known]) => known === name));
  if (unknown.length) throw new Error(`unknown section(s) ${unknown.join(', ')}; known: ${SECTIONS.map(([name]) => name).join(', ')}`);
  progress(
    `quotafed bench (${options.quick ? 'quick' : 'full'}) on ${cpus().length} CPU(s), ${Math.round(totalmem() / 2 ** 30)} ` +
      `GiB, Node ${process.version}`,
  );
  const redisServer = await startRedis();
  const admin = newClient(redisServer.url);
  const ctx: BenchContext = {
    options,
    redisServer,
    admin,
    figures: {},
    ms: (full, quick) => (options.quick ? quick : full),
  };
  const tables: Table[] = [];
  const loads: Record<string, number> = {};
  const failures: string[] = [];
  try {
    for (const [name, section] of SECTIONS) {
      if (options.only.length && !options.only.includes(name)) continue;
      // The whole run must stay under 10 minutes on a busy machine: skip what no longer fits, and say so.
      if (elapsedSeconds() > (options.quick ? 150 : 500)) {
        failures.push(`${name}: skipped, the run had already taken ${Math.round(elapsedSeconds())} s`);
        progress(`section ${name}: SKIPPED (time budget)`);
        continue;
      }
      const started = elapsedSeconds();
      progress(
        `section ${name}: start (load average ${loadavg()
          .map((v) => v.toFixed(1))
          .join(' ')})`,
      );
      loads[name] = loadavg()[0]!;
      try {
        const produced = await section(ctx);
        for (const table of produced) process.stdout.write(`\n${renderTable(table)}\n`);
        tables.push(...produced);
      } catch (error) {
        failures.push(`${name}: ${(error as Error).stack ?? String(error)}`);
        progress(`section ${name} FAILED: ${(error as Error).message}`);
      }
      progress(`section ${name}: done in ${Math.round(elapsedSeconds() - started)} s`);
    }
    for (const table of [tuningTable(ctx.figures), targetsTable(ctx.figures)]) {
      if (!table.rows.length) continue;
      process.stdout.write(`\n${renderTable(table)}\n`);
      tables.push(table);
    }
  } finally {
    await admin.quit().catch(() => admin.disconnect());
    await redisServer.stop();
  }
  const meta = {
    when: new Date().toISOString(),
    mode: options.quick ? 'quick' : 'full',
    node: process.version,
    cpus: cpus()
      .map((cpu) => cpu.model)
      .join(' | '),
    seconds: Math.round(elapsedSeconds()),
    /** 1-minute load average when each section started: this machine is shared. */
    loadAverageAtSectionStart: loads,
  };
  mkdirSync(options.out, { recursive: true });
  writeFileSync(join(options.out, 'results.json'), `${JSON.stringify({ meta, figures: ctx.figures, tables, failures }, null, 2)}\n`);
  const markdown = [
    `# quotafed bench (${meta.mode}), ${meta.when}`,
    '',
    `Node ${meta.node}; ${cpus().length} CPU(s): ${meta.cpus}; ${meta.seconds} s. Load average (1 min) at section start: ${Object.entries(
      loads,
    )
      .map(([name, load]) => `${name} ${load.toFixed(1)}`)
      .join(', ')}.`,
    ...tables.map((t) => `\n${renderTable(t)}`),
  ];
  if (failures.length) markdown.push('', '## Failed sections', '', ...failures.map((f) => `    ${f.split('\n')[0]}`));
  writeFileSync(join(options.out, 'results.md'), `${markdown.join('\n')}\n`);
  progress(`done in ${meta.seconds} s; wrote ${join(options.out, 'results.json')} and results.md`);
  if (failures.length) {
    for (const failure of failures) process.stderr.write(`${failure}\n`);
    process.exitCode = 1;
  }
}

await main();
// A client or child left open by a failed section must not keep the run alive after the report is written.
process.exit(process.exitCode ?? 0);

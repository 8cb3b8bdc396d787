// The quotafed command line. Exit codes: 0 ok, 1 runtime failure, 2 usage or invalid config.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, ENV_OVERRIDES } from '../config/load.ts';

const USAGE = `Usage: quotafed <command> [--config <file>]

Commands:
  serve          run one region's service (gateway, /v1/check, /healthz, /readyz, /metrics)
  check-config   validate a region config and exit
  launch         start a local three-region federation (redis-server per region, demo upstream)

Options:
  -c, --config <file>   region config (YAML); default: $QUOTAFED_CONFIG
      --workers <n>     serve: run n worker processes on the port (node:cluster; default 1)
      --watch-config    serve: reload the policy when the config file changes
                        (SIGHUP and POST /admin/policy/reload always reload it)
      --new-federation  serve: this is the first start of a brand-new federation, so peers
                        that cannot be reached yet do not fence the current windows
                        (same as federation.bootstrap: new; ignored once this region's
                        Redis holds quotafed state; see docs/federation.md §4a)
  -v, --version         print the package version and exit
  -h, --help            show this help

Environment overrides:
${Object.entries(ENV_OVERRIDES)
  .map(([name, field]) => `  ${name.padEnd(28)} ${field}`)
  .join('\n')}
`;

const COMMAND_LINE = {
  allowPositionals: true,
  strict: true,
  options: {
    config: { type: 'string', short: 'c' },
    'watch-config': { type: 'boolean' },
    'new-federation': { type: 'boolean' },
    workers: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
    version: { type: 'boolean', short: 'v' },
  },
} as const;

/** The installed package's version (package.json sits two levels above src/cli/ and dist/cli/ alike). */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'launch') {
    // Loaded only when asked for (it starts redis-server processes and a demo upstream); parses its own flags.
    const { launch } = (await import('./launch.ts')) as { launch: (args: readonly string[]) => Promise<number> };
    return launch(argv.slice(1));
  }
  let parsed: ReturnType<typeof parseArgs<typeof COMMAND_LINE>>;
  try {
    parsed = parseArgs({ ...COMMAND_LINE, args: argv });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const [command, ...rest] = parsed.positionals;
  if (parsed.values.version) {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  if (parsed.values.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined && !parsed.values.help ? 2 : 0;
  }
  if (rest.length > 0) {
    process.stderr.write(`unexpected argument(s): ${rest.join(' ')}\n\n${USAGE}`);
    return 2;
  }
  try {
    switch (command) {
      case 'serve': {
        const { serveCommand } = await import('./serve.ts');
        const workers = parsed.values.workers === undefined ? undefined : Number(parsed.values.workers);
        if (workers !== undefined && (!Number.isInteger(workers) || workers < 1 || workers > 64)) {
          process.stderr.write(`--workers takes a whole number from 1 to 64, not ${JSON.stringify(parsed.values.workers)}\n`);
          return 2;
        }
        return await serveCommand(parsed.values.config, {
          watchConfig: parsed.values['watch-config'] ?? false,
          newFederation: parsed.values['new-federation'] ?? false,
          ...(workers ? { workers } : {}),
        });
      }
      case 'check-config': {
        const { checkConfigCommand } = await import('./serve.ts');
        return await checkConfigCommand(parsed.values.config);
      }
      default:
        process.stderr.write(`unknown command: ${command}\n\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`quotafed: ${error.message}\n`);
      return 2;
    }
    process.stderr.write(`quotafed: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
// Anything still holding the event loop after shutdown (a stray socket) must not keep the process alive.
setTimeout(() => process.exit(), 2_000).unref();

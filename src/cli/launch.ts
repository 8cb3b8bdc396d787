// `npm start`: a local three-region federation on this machine, no Docker needed. Starts a redis-server per
// region, the demo upstream and the regional services, prints what to try, and stops everything on Ctrl-C.
// Exit codes follow main.ts: 0 stopped cleanly, 1 could not start (redis-server missing, a port taken, a region
// failed), 2 usage.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PortsInUseError, RedisMissingError, startLocalFederation, type LocalFederation } from '../ops/local-federation.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const USAGE = `usage: npm start [-- options]

Launches the local federation: us-east, eu-west and ap-south from regions/*.yaml, one redis-server each,
the demo upstream, and the three regional services. Ctrl-C stops everything.

options (ports are given in region order: us-east,eu-west,ap-south):
  --redis-ports 7381,7382,7383   Redis ports instead of the ones the configs name (6381-6383)
  --ports 9081,9082,9083         service ports instead of 8081-8083
  --upstream-port 9090           demo upstream port instead of 8090
  --regions-dir <dir>            region configs to launch (default: regions/)
  -h, --help                     this text
`;

function portList(text: string | undefined, flag: string): number[] | undefined {
  if (text === undefined) return undefined;
  const ports = text.split(',').map((part) => Number(part.trim()));
  if (ports.some((port) => !Number.isInteger(port) || port < 1 || port > 65_535))
    throw new UsageError(`${flag} takes ports such as 7381,7382,7383; got ${text}`);
  return ports;
}

class UsageError extends Error {}

/** Shell-quoted single argument, so printed commands paste safely. */
const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;

export function tryThis(regions: ReadonlyArray<{ name: string; url: string }>, apiKey: string): string {
  const [first, second, third] = regions;
  if (!first) return '';
  const other = second ?? first;
  const lines = [
    '',
    'Try this in another terminal:',
    '',
    `  # an allowed request through ${first.name}, with X-RateLimit-* headers (and the demo upstream's answer)`,
    `  curl -i -H ${q(`X-API-Key: ${apiKey}`)} ${first.url}/hello`,
    '',
    `  # /checkout allows 10 per minute per key across ALL regions together. ${first.name} starts with its share`,
    `  # (3 of 10); idle regions lend it theirs within a few sync intervals, each keeping 1 for its own callers;`,
    `  # then ${first.name} answers 429 {"error":"Rate limit exceeded"} with Retry-After.`,
    `  for i in $(seq 1 11); do curl -s -o /dev/null -w "checkout $i: %{http_code}\n" -H ${q(`X-API-Key: ${apiKey}`)} ` +
      `${first.url}/checkout; sleep 0.2; done`,
    '',
    `  # the same key from ${other.name}: at most the 1 it kept is left, then 429 — the federation never admits`,
    `  # more than 10 (+ the leakage budget) per minute for this key, whichever regions the requests go to`,
    `  for i in 1 2; do curl -s -o /dev/null -w "${other.name} checkout $i: %{http_code}\n" -H ` +
      `${q(`X-API-Key: ${apiKey}`)} ${other.url}/checkout; done`,
    '',
    '  # metrics and health',
    `  curl -s ${first.url}/metrics | grep -E '^quotafed_(decisions|http_429)_total'`,
    `  curl -s ${(third ?? first).url}/healthz`,
    '',
    'Ctrl-C stops every process started here.',
    '',
  ];
  return lines.join('\n');
}

/** The `launch` subcommand. Resolves with the exit code once everything it started has stopped. */
export async function launch(argv: readonly string[] = process.argv.slice(2)): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const err = (line: string) => process.stderr.write(`${line}\n`);
  let federation: LocalFederation | undefined;
  let stopping: Promise<number> | undefined;

  const shutdown = (reason: string): Promise<number> => {
    stopping ??= (async () => {
      out(`\n${reason}: stopping the local federation …`);
      await federation?.stop();
      out('stopped.');
      return 0;
    })();
    return stopping;
  };
  let stoppedBySignal: (code: number) => void = () => undefined;
  const stopped = new Promise<number>((resolve) => (stoppedBySignal = resolve));
  // Signals during start also stop cleanly: the start is awaited, then everything is stopped.
  let signalled: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    signalled ??= signal;
    if (federation) void shutdown(signal).then(stoppedBySignal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // Last resort if the launcher itself dies: no orphaned redis-server or service keeps its port.
  const killLeftovers = () => {
    for (const pid of federation?.pids() ?? []) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  process.once('exit', killLeftovers);

  const finish = (code: number) => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', killLeftovers);
    process.exitCode = code;
    return code;
  };

  try {
    const { values } = parseArgs({
      args: [...argv],
      allowPositionals: true, // `launch` itself, when the caller passes it along
      options: {
        'redis-ports': { type: 'string' },
        ports: { type: 'string' },
        'upstream-port': { type: 'string' },
        'regions-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      out(USAGE);
      return finish(0);
    }
    const upstreamPort = values['upstream-port'] === undefined ? undefined : portList(values['upstream-port'], '--upstream-port')?.[0];
    out('quotafed: launching the local federation');
    federation = await startLocalFederation({
      root: ROOT,
      regionsDir: values['regions-dir'],
      redisPorts: portList(values['redis-ports'], '--redis-ports'),
      servicePorts: portList(values.ports, '--ports'),
      upstreamPort,
      progress: (line) => out(`  ${line}`),
      output: out,
      color: process.stdout.isTTY === true,
      onServiceExit: (region, code, signal) =>
        err(`\n${region} exited (${signal ?? `code ${code}`}); the other regions keep running. Ctrl-C stops the rest.\n`),
    });
  } catch (error) {
    if (error instanceof RedisMissingError) {
      err(`quotafed: ${error.message}`);
      return finish(1);
    }
    if (error instanceof PortsInUseError) {
      err('quotafed: cannot launch, these ports are already in use:');
      for (const { port, what } of error.taken) err(`  ${port}  ${what}`);
      err('Stop whatever holds them (a previous `npm start`?) or move the federation, for example:');
      err('  npm start -- --redis-ports 7381,7382,7383 --ports 9081,9082,9083 --upstream-port 9090');
      return finish(1);
    }
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      err(`quotafed: ${(error as Error).message}\n\n${USAGE}`);
      return finish(2);
    }
    err(`quotafed: the local federation did not start: ${(error as Error).message}`);
    return finish(1);
  }

  if (signalled) return finish(await shutdown(signalled));
  const apiKey = `demo-${randomBytes(3).toString('hex')}`;
  out(tryThis(federation.regions, apiKey));
  // Runs until a signal; the demo upstream's server keeps the event loop alive meanwhile.
  return finish(await stopped);
}

export default launch;

// Run directly: `tsx src/cli/launch.ts` (main.ts's `launch` subcommand calls `launch()` instead).
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  void launch(process.argv.slice(2)).then((code) => process.exit(code));
}

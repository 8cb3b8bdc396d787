// One regional service as a child process (`quotafed serve --config …`), so a crash in one region leaves the
// others running. Its output is prefixed with the region; pino's JSON lines are shortened to one readable line.
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { cliCommand } from '../paths.ts';
import { listensOn } from './port-owner.ts';
import { stopChild } from './stop-child.ts';

export interface ServiceProcessOptions {
  region: string;
  configPath: string;
  /** Where the regional service answers (waited for before `startServiceProcess` resolves). */
  port: number;
  /** The working directory of the service (the package root). */
  root: string;
  /** Receives every output line, already prefixed. */
  write: (line: string) => void;
  /** Called when the process ends without having been asked to. */
  onUnexpectedExit?: (code: number | null, signal: NodeJS.Signals | null) => void;
  env?: NodeJS.ProcessEnv;
  /** More `serve` flags (e.g. `--new-federation`). */
  args?: readonly string[];
  readyTimeoutMs?: number;
  color?: boolean;
}

export interface ServiceProcess {
  readonly region: string;
  readonly pid: number | undefined;
  readonly url: string;
  /** Output lines kept for error reports. */
  recentOutput(): string[];
  running(): boolean;
  /** SIGTERM (a graceful shutdown in the service), SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** Deployment variables that would point a local child at the wrong Redis, port or upstream. */
const LOCATION_ENV = [
  'QUOTAFED_CONFIG',
  'QUOTAFED_PORT',
  'QUOTAFED_HOST',
  'QUOTAFED_REDIS_URL',
  'QUOTAFED_UPSTREAM_URL',
  'QUOTAFED_ADMIN_PORT',
];

const COLORS = [36, 35, 33, 32, 34, 31];
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** `{"level":30,"time":…,"msg":"listening","port":8081}` → `INFO listening port=8081`. Other lines pass as they are. */
export function readableLogLine(line: string): string {
  if (!line.startsWith('{')) return line;
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  if (typeof entry.msg !== 'string') return line;
  const { level, msg, time: _time, pid: _pid, hostname: _hostname, region: _region, ...rest } = entry;
  const fields = Object.entries(rest).map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  return [LEVELS[level as number] ?? String(level ?? ''), msg, ...fields].filter((part) => part !== '').join(' ');
}

/** Calls `onLine` with each non-blank line of a stream's chunks (a partial last line waits for the next chunk). */
export function lineSplitter(onLine: (line: string) => void): (chunk: Buffer) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk.toString('utf8');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    // A service that never writes a newline must not grow this buffer without bound.
    if (pending.length > 64_000) {
      lines.push(pending);
      pending = '';
    }
    for (const line of lines) if (line.trim() !== '') onLine(line);
  };
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = request({ host: '127.0.0.1', port, path: '/healthz', timeout: 1_000 }, (response) => {
      response.resume();
      resolve(true);
    });
    probe.once('timeout', () => probe.destroy());
    probe.once('error', () => resolve(false));
    probe.end();
  });
}

let colorIndex = 0;

export async function startServiceProcess(options: ServiceProcessOptions): Promise<ServiceProcess> {
  const color = COLORS[colorIndex++ % COLORS.length]!;
  const label = options.color ? `\u001b[${color}m[${options.region}]\u001b[0m` : `[${options.region}]`;
  const recent: string[] = [];
  const emit = (line: string) => {
    recent.push(line);
    if (recent.length > 40) recent.shift();
    options.write(`${label} ${readableLogLine(line)}`);
  };

  const env: NodeJS.ProcessEnv = { ...(options.env ?? process.env) };
  for (const name of LOCATION_ENV) delete env[name];
  const child: ChildProcess = spawn(process.execPath, cliCommand('serve', '--config', options.configPath, ...(options.args ?? [])), {
    cwd: options.root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: a Ctrl-C in the terminal reaches only the launcher, which stops services in order.
    detached: true,
  });
  child.stdout!.on('data', lineSplitter(emit));
  child.stderr!.on('data', lineSplitter(emit));

  let stopping = false;
  let ready = false;
  child.once('exit', (code, signal) => {
    // Before it is ready, the start itself reports the failure.
    if (ready && !stopping) options.onUnexpectedExit?.(code, signal);
  });
  const running = () => child.exitCode === null && child.signalCode === null;

  const service: ServiceProcess = {
    region: options.region,
    pid: child.pid,
    url: `http://127.0.0.1:${options.port}`,
    recentOutput: () => [...recent],
    running,
    async stop(graceMs = 10_000) {
      stopping = true;
      await stopChild(child, graceMs);
    },
  };

  const timeoutMs = options.readyTimeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  // Ours answers: a probe alone may reach another process that took the port before the child could bind it.
  const oursAnswers = async () => (await answers(options.port)) && listensOn(child.pid!, options.port) !== false;
  while (!(await oursAnswers())) {
    if (!running()) {
      stopping = true;
      throw new Error(
        `${options.region} exited during start (code ${child.exitCode ?? child.signalCode}):\n  ${recent.slice(-15).join('\n  ')}`,
      );
    }
    if (Date.now() > deadline) {
      await service.stop(2_000);
      throw new Error(
        `${options.region} did not answer on port ${options.port} within ${timeoutMs} ms:\n  ${recent.slice(-15).join('\n  ')}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  ready = true;
  return service;
}

// Child processes for the HTTP benches: servers under test and the autocannon load generator, each its own
// Node process so the server and the load generator do not share an event loop (or, ideally, a core).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { stopChild } from '../../src/ops/stop-child.ts';
import type { LoadFigures, LoadOptions } from '../http/load.ts';
import type { ServerMode, ServerOptions } from '../http/server.ts';
import type { KeyedLoadFigures, KeyedLoadOptions } from './keyed-load.ts';

const SERVER = fileURLToPath(new URL('../http/server.ts', import.meta.url));
const LOAD = fileURLToPath(new URL('../http/load.ts', import.meta.url));
const KEYED_LOAD = fileURLToPath(new URL('./keyed-load.ts', import.meta.url));

function tsxProcess(file: string, args: string[]): ChildProcess {
  // BENCH_NODE_ARGS: more Node flags for every child (e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof' to profile the
  // services a section starts; Node refuses --cpu-prof in NODE_OPTIONS).
  const extra = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  // stdin is a pipe the child watches: when this process dies, the pipe closes and the child exits too.
  return spawn(process.execPath, [...extra, '--import', 'tsx', file, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
}

export interface ServerProcess {
  url: string;
  /** CPU time (user + system, µs) the server process has used so far; undefined where /proc is missing. */
  cpuMicros(): number | undefined;
  /** Its write system calls and its main thread's wake-ups so far (processIo); undefined where /proc is missing. */
  io(): ProcessIo | undefined;
  stop(): Promise<void>;
}

/** utime + stime of a process from /proc/<pid>/stat (Linux), in µs. */
export function processCpuMicros(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at ") ".
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1_000_000) / 100;
  } catch {
    return undefined;
  }
}

/** A process's system calls that wrote (sockets, pipes, files) and its voluntary context switches (wake-ups from a wait) so far. */
export interface ProcessIo {
  writes: number;
  wakeups: number;
}

/**
 * `syscw` of /proc/<pid>/io and `voluntary_ctxt_switches` of /proc/<pid>/status (the main thread's): on this loopback
 * setup each command sent to Redis or answer written is a write, and each wait that ends (a reply, a request, a timer)
 * a wake-up.
 *
 * @example
 * const before = processIo(child.pid); // ... load ...; const after = processIo(child.pid);
 */
export function processIo(pid: number | undefined): ProcessIo | undefined {
  if (pid === undefined) return undefined;
  try {
    const writes = /^syscw:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1];
    const wakeups = /^voluntary_ctxt_switches:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    if (writes === undefined || wakeups === undefined) return undefined;
    return { writes: Number(writes), wakeups: Number(wakeups) };
  } catch {
    return undefined;
  }
}

/** `script`: another checkout's bench/http/server.ts (A/B of two versions side by side); this one's by default. */
export async function startServer(mode: ServerMode, options: ServerOptions = {}, script = SERVER): Promise<ServerProcess> {
  const child = tsxProcess(script, [mode, JSON.stringify(options)]);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4_000);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server ${mode} did not start in 90 s: ${stderr}`));
    }, 90_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      const match = /READY (\S+)/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server ${mode} exited (${code}): ${stderr}`));
    });
  });
  child.removeAllListeners('exit');
  return {
    url,
    cpuMicros: () => processCpuMicros(child.pid),
    io: () => processIo(child.pid),
    stop: () => stopChild(child, 15_000),
  };
}

export function runLoad(options: LoadOptions): Promise<LoadFigures> {
  return runLoadProcess<LoadFigures>(LOAD, options, options.durationS + options.warmupS);
}

/** /v1/check with one API key per request drawn from a distribution (bench/lib/keyed-load.ts), in its own process. */
export function runKeyedLoad(options: KeyedLoadOptions): Promise<KeyedLoadFigures> {
  return runLoadProcess<KeyedLoadFigures>(KEYED_LOAD, options, options.durationS);
}

async function runLoadProcess<Figures>(script: string, options: object, seconds: number): Promise<Figures> {
  const child = tsxProcess(script, [JSON.stringify(options)]);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4_000)));
  const limitMs = seconds * 1000 + 30_000;
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.once('exit', (exitCode) => {
      clearTimeout(timer);
      resolve(exitCode);
    });
  });
  const line = stdout.trim().split('\n').pop();
  if (code !== 0 || !line) throw new Error(`load generator failed (${code}): ${stderr}`);
  return JSON.parse(line) as Figures;
}

/** One unrecorded warm-up run: a server, the request it will be measured with, load options beyond the defaults. */
export interface WarmUpRun {
  server: ServerProcess;
  method: 'GET' | 'POST';
  extra?: Partial<LoadOptions>;
}

/**
 * Warms servers up alike before measured rounds (nothing recorded): a freshly started Node server spends up to
 * twice its steady CPU per request while its code is being optimised (the quotafed service paid 280 µs per request
 * in a first round and 100-140 µs after), which a short warm-up per run does not cover. GET goes to /v1/items,
 * POST to /v1/check, as in the measured rounds.
 */
export async function warmUp(runs: readonly WarmUpRun[], options: { durationS: number; connections: number }): Promise<void> {
  for (const { server, method, extra } of runs) {
    await runLoad({
      url: server.url,
      method,
      path: method === 'POST' ? '/v1/check' : '/v1/items',
      connections: options.connections,
      durationS: options.durationS,
      warmupS: 0,
      apiKeys: 10_000,
      ...extra,
    });
  }
}

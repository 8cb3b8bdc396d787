// A redis-server under valgrind's callgrind that counts only what one command executes (FCALL by default): the
// instructions a script runs, the same on every run whatever else the machine does, where timings move by 20-50%
// from run to run on a shared machine (bench/lua-batch-time.ts, bench/apply-gossip-time.ts with CALLGRIND=1). About
// 50 times slower than a plain server. Needs valgrind (`apt-get install valgrind`).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, portIsFree } from '../../src/ops/redis-process.ts';

/**
 * A redis-server under callgrind that counts only what `command` (Redis's C function: fcallCommand, evalShaCommand)
 * executes; `stop()` ends it and answers the instructions
 * counted (the `totals:` line of its output).
 */
export async function callgrindRedis(command = 'fcallCommand'): Promise<{ url: string; stop(): Promise<number> }> {
  const port = await freePort();
  const out = join(mkdtempSync(join(tmpdir(), 'qf-callgrind-')), 'callgrind.out');
  const valgrind = ['--tool=callgrind', `--toggle-collect=${command}`, `--callgrind-out-file=${out}`];
  const redisArgs = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--hz', '1'];
  const child = spawn('valgrind', [...valgrind, 'redis-server', ...redisArgs], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `redis://127.0.0.1:${port}`;
  // Listening (startRedis's own wait does not start a process under valgrind): about 2 s.
  for (let tries = 0; await portIsFree(port); tries++) {
    if (tries > 300) throw new Error('redis-server under valgrind did not start within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      const totals = /^totals:\s*(\d+)/m.exec(readFileSync(out, 'utf8'));
      if (totals === null) throw new Error(`no totals in ${out}`);
      return Number(totals[1]);
    },
  };
}

// listensOn reads /proc to tell which process holds a listening port (src/ops/port-owner.ts), so a start-up
// probe that reaches some other process is not taken for the child it started.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { listensOn } from '../../src/ops/port-owner.ts';

it('names the process that holds a listening port, and no other', async () => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 10000)'], { stdio: 'ignore' });
  try {
    expect(listensOn(process.pid, port)).toBe(true);
    expect(listensOn(other.pid!, port)).toBe(false);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    expect(listensOn(process.pid, port)).toBe(false);
  } finally {
    other.kill();
  }
});

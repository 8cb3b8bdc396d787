// Stopping a child process the one way every launcher here wants: SIGTERM so it can shut down cleanly,
// SIGKILL when it has not exited after `graceMs`. Resolves once the process has exited.
import type { ChildProcess } from 'node:child_process';

export function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  // An exited child emits no further 'exit': waiting for one would hang.
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

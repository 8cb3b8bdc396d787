// The standalone entry point: starts, answers the client, stops cleanly on SIGTERM.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Toxiproxy } from 'toxiproxy-node-client';
import { describe, expect, it } from 'vitest';

describe('chaos/toxiproxy/main.ts', { timeout: 30_000 }, () => {
  it('serves the API on the requested port and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'chaos/toxiproxy/main.ts', '--host', '127.0.0.1', '--port', '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const lines = createInterface({ input: child.stdout! });
        lines.on('line', (line) => {
          const entry = JSON.parse(line) as { msg?: string; url?: string };
          if (entry.msg === 'toxiproxy server ready' && entry.url) resolve(entry.url);
        });
        child.once('exit', () => reject(new Error('server exited before it was ready')));
      });
      const client = new Toxiproxy(url);
      expect(await client.getVersion()).toContain('"version"');
      const proxy = await client.createProxy({ name: 'cli', listen: '127.0.0.1:0', upstream: '127.0.0.1:1' });
      expect(proxy.listen).toMatch(/^127\.0\.0\.1:\d+$/);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});

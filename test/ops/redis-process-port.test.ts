// startRedis on a port someone else holds must fail loudly instead of pinging the other server.
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort, portIsFree, startRedis } from '../../src/ops/redis-process.ts';

describe('startRedis on a taken port', () => {
  it('refuses, naming the port', async () => {
    const port = await freePort();
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    try {
      expect(await portIsFree(port)).toBe(false);
      await expect(startRedis({ port })).rejects.toThrow(`port ${port} is already in use`);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
    expect(await portIsFree(port)).toBe(true);
  });
});

// A TCP proxy in front of one redis-server that can lose one reply: armed, it closes the connection (both sides)
// when the server's next bytes arrive instead of passing them on. The command ran; the client never hears of it
// and, as ioredis does after a reconnect, sends it again. Closed after the file's tests.
import { createServer, connect, type Socket } from 'node:net';
import { afterAll } from 'vitest';

export interface DropProxy {
  /** redis://127.0.0.1:<port> of the proxy. */
  readonly url: string;
  /** Lose the next reply the server sends on any connection (one-shot). */
  dropNextReply(): void;
  /** Replies lost so far. */
  readonly dropped: number;
}

/**
 * Start a proxy to `upstreamUrl` (redis://host:port) for this test file.
 *
 * @example
 * ```ts
 * const proxy = await useDropProxy(server.url);
 * const redis = new Redis(proxy.url);
 * proxy.dropNextReply();
 * await redis.incr('n'); // runs twice on the server: once before the drop, once resent
 * ```
 */
export async function useDropProxy(upstreamUrl: string): Promise<DropProxy> {
  const upstream = new URL(upstreamUrl);
  let armed = false;
  let dropped = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const redis = connect(Number(upstream.port), upstream.hostname);
    for (const socket of [client, redis]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    const close = () => {
      client.destroy();
      redis.destroy();
    };
    client.on('close', close);
    redis.on('close', close);
    client.on('data', (chunk) => redis.write(chunk));
    redis.on('data', (chunk) => {
      if (armed) {
        armed = false;
        dropped++;
        close();
        return;
      }
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the drop proxy has no TCP address');
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `redis://127.0.0.1:${address.port}`,
    dropNextReply() {
      armed = true;
    },
    get dropped() {
      return dropped;
    },
  };
}

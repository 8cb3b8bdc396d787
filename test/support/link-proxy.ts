// A TCP proxy in front of a peer's Redis that a test (or the chaos lab) can cut and heal: a partition of one
// directed gossip link without stopping anyone's Redis.
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface LinkProxy {
  readonly port: number;
  readonly url: string;
  /** Drop every connection and refuse new ones until heal(). */
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startLinkProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<LinkProxy> {
  const sockets = new Set<Socket>();
  let open = true;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    track(client);
    track(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    cut() {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      open = true;
    },
    close() {
      open = false;
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

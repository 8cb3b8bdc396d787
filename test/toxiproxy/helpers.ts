// Shared pieces for the Toxiproxy tests: a server per test file driven through toxiproxy-node-client, a real TCP
// echo server as the upstream, and a client socket that records what it sees.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Toxiproxy, type Proxy } from 'toxiproxy-node-client';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startToxiproxyServer, type ToxiproxyServer } from '../../chaos/toxiproxy/server.ts';

export interface ToxiproxyFixture {
  server: ToxiproxyServer;
  client: Toxiproxy;
}

/** One server for the file; every test starts from no proxies. */
export function useToxiproxy(): ToxiproxyFixture {
  const fixture = {} as ToxiproxyFixture;
  beforeAll(async () => {
    fixture.server = await startToxiproxyServer({ port: 0 });
    fixture.client = new Toxiproxy(fixture.server.url);
  });
  afterEach(async () => {
    const proxies = await fixture.client.getAll();
    await Promise.all(Object.values(proxies).map((proxy) => proxy.remove()));
  });
  afterAll(() => fixture.server?.close());
  return fixture;
}

export function portOf(listen: string): number {
  return Number(listen.slice(listen.lastIndexOf(':') + 1));
}

export interface EchoServer {
  address: string;
  port: number;
  /** Upstream-side view of each accepted connection, in accept order. */
  peers: PeerRecord[];
  close(): Promise<void>;
}

export interface PeerRecord {
  received: Buffer[];
  /** Resolves when the upstream side of the connection closes, with the socket error code if any. */
  closed: Promise<{ error?: string }>;
}

/** Echoes every byte back; `silent` only records (for upstream-direction checks). */
export async function startEchoServer(options: { silent?: boolean } = {}): Promise<EchoServer> {
  const peers: PeerRecord[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    const received: Buffer[] = [];
    let error: string | undefined;
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code));
    socket.on('data', (data: Buffer) => {
      received.push(data);
      if (!options.silent) socket.write(data);
    });
    const closed = new Promise<{ error?: string }>((resolve) =>
      socket.once('close', () => {
        sockets.delete(socket);
        resolve({ error });
      }),
    );
    peers.push({ received, closed });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    address: `127.0.0.1:${port}`,
    port,
    peers,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface ClientEnd {
  socket: Socket;
  /** Every byte received so far, concatenated. */
  received(): Buffer;
  /** Number of 'data' events (pieces) received. */
  pieces(): number;
  /** Resolves once at least `bytes` bytes arrived in total; rejects if the socket closes first or after `ms`. */
  waitFor(bytes: number, ms?: number): Promise<Buffer>;
  /** Sends `data` and resolves with the ms until that many more bytes have come back. */
  roundTrip(data: Buffer | string, ms?: number): Promise<number>;
  /** Resolves when the socket closes: the error code (e.g. ECONNRESET) if any, and when (performance.now()). */
  closed: Promise<{ error?: string; at: number }>;
}

/** Connects to `listen` (e.g. a proxy's listen address) and records what arrives. */
export function openClient(listen: string): Promise<ClientEnd> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: portOf(listen), noDelay: true });
    const chunks: Buffer[] = [];
    let total = 0;
    let error: string | undefined;
    let wake: () => void = () => undefined;
    socket.on('data', (data: Buffer) => {
      chunks.push(data);
      total += data.length;
      wake();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code));
    const closed = new Promise<{ error?: string; at: number }>((done) =>
      socket.once('close', () => {
        wake();
        done({ error, at: performance.now() });
      }),
    );
    const waitFor = (bytes: number, ms = 5_000) =>
      new Promise<Buffer>((done, fail) => {
        const timer = setTimeout(() => fail(new Error(`timed out waiting for ${bytes} bytes (have ${total})`)), ms);
        const check = () => {
          if (total >= bytes) {
            clearTimeout(timer);
            done(Buffer.concat(chunks));
          } else if (socket.destroyed) {
            clearTimeout(timer);
            fail(new Error(`socket closed with ${total} of ${bytes} bytes`));
          }
        };
        wake = check;
        check();
      });
    socket.once('connect', () =>
      resolve({
        socket,
        received: () => Buffer.concat(chunks),
        pieces: () => chunks.length,
        waitFor,
        async roundTrip(data, ms) {
          const want = total + Buffer.byteLength(data);
          const started = performance.now();
          socket.write(data);
          await waitFor(want, ms);
          return performance.now() - started;
        },
        closed,
      }),
    );
    socket.once('error', reject);
  });
}

/** Resolves true when a TCP connect to the port is refused. */
export function connectRefused(listen: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: portOf(listen) });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

export { sleep } from '../support/wait.ts';

/** A proxy on a free loopback port in front of `upstream`. */
export function proxyTo(client: Toxiproxy, name: string, upstream: string): Promise<Proxy> {
  return client.createProxy({ name, listen: '127.0.0.1:0', upstream });
}

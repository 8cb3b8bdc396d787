// One accepted client: dial the upstream, then run an upstream link (client → server) and a downstream link
// (server → client) through the proxy's toxics. When a link's source ends, its destination is closed fully,
// which ends the other link in turn: like Go, there is no TCP half-close through the proxy.
import { connect, type Socket } from 'node:net';
import { splitHostPort } from './address.ts';
import { Link } from './link.ts';
import { waiters, type Sink } from './sink.ts';
import type { ToxicCollection } from './toxic-collection.ts';

export interface Connection {
  /** Close both sockets now (proxy disabled or deleted). */
  destroy(): void;
}

/** A destination that stays open after its peer half-closes would never finish; give up on it after this. */
const CLOSE_GRACE_MS = 5_000;

function closeFully(socket: Socket): void {
  if (socket.destroyed) return;
  const force = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
  force.unref();
  socket.end(() => {
    clearTimeout(force);
    socket.destroy();
  });
}

function reset(socket: Socket): void {
  if (socket.destroyed) return;
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

function socketSink(socket: Socket, onEnd: (reset: boolean) => void): Sink {
  let ended = false;
  const drained = waiters();
  socket.on('drain', drained.release);
  socket.on('close', drained.release);
  const hasRoom = () => ended || socket.destroyed || !socket.writableNeedDrain;
  return {
    push(item) {
      if (ended) return;
      if (item.kind === 'end') {
        ended = true;
        drained.release();
        onEnd(item.reset);
        return;
      }
      if (socket.writable) socket.write(item.data);
    },
    hasRoom,
    waitRoom: () => (hasRoom() ? Promise.resolve() : drained.wait()),
  };
}

export function openConnection(
  client: Socket,
  upstreamAddress: string,
  toxics: ToxicCollection,
  onClose: (dialError?: Error) => void,
): Connection {
  let links: Link[] = [];
  let upstream: Socket | undefined;
  let dialError: Error | undefined;
  let finished = false;
  const finish = () => {
    if (finished || !client.destroyed || (upstream !== undefined && !upstream.destroyed)) return;
    finished = true;
    for (const link of links) {
      link.dispose();
      toxics.detach(link);
    }
    links = [];
    onClose(dialError);
  };
  const destroy = () => {
    client.destroy();
    upstream?.destroy();
  };

  client.on('error', () => undefined);
  client.once('close', finish);

  let target: { host: string; port: number };
  try {
    target = splitHostPort(upstreamAddress);
  } catch (error) {
    dialError = error as Error;
    client.destroy();
    return { destroy };
  }

  const server = connect({ host: target.host || 'localhost', port: target.port, allowHalfOpen: true, noDelay: true });
  upstream = server;
  let connected = false;
  server.on('error', (error) => {
    // A failed dial just closes the client's connection; the proxy keeps listening.
    if (!connected) {
      dialError = error;
      client.destroy();
    }
  });
  server.once('close', finish);
  client.once('close', () => {
    if (!connected) server.destroy();
  });
  server.once('connect', () => {
    connected = true;
    if (client.destroyed) {
      server.destroy();
      return;
    }
    const closeLink = (destination: Socket) => (rst: boolean) => {
      if (!rst) return closeFully(destination);
      reset(client);
      reset(server);
    };
    links = [
      new Link('upstream', client, socketSink(server, closeLink(server)), toxics.chain('upstream')),
      new Link('downstream', server, socketSink(client, closeLink(client)), toxics.chain('downstream')),
    ];
    for (const link of links) toxics.attach(link);
    client.resume();
  });
  return { destroy };
}

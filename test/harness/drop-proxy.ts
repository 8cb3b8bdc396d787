// A TCP proxy in front of one redis-server that can lose one reply or one command. Armed for a reply, it closes
// the connection (both sides) when the server's next bytes arrive instead of passing them on: the command ran, the
// client never hears of it and, as ioredis does after a reconnect, sends it again. Armed for a command, it closes
// the connection when the command's bytes arrive from the client, before the server has them: it never ran, and
// the client sends it again after reconnecting. Closed after the file's tests.
import { createServer, connect, type Socket } from 'node:net';
import { afterAll } from 'vitest';

export interface DropProxy {
  /** redis://127.0.0.1:<port> of the proxy. */
  readonly url: string;
  /**
   * Lose the next reply the server sends on any connection (one-shot). With `command` (a command's name and its
   * first arguments, e.g. `['FCALL', fn]`), the reply to the next command that starts so, on its connection.
   */
  dropNextReply(command?: readonly string[]): void;
  /** Lose the next command that starts with `command` (name, first arguments) on any connection (one-shot). */
  dropNextCommand(command: readonly string[]): void;
  /** Replies and commands lost so far. */
  readonly dropped: number;
  /** Commands lost so far (of `dropped`). */
  readonly droppedCommands: number;
}

/** A command's first words as a client writes them (RESP bulk strings), lower-cased for a case-blind search. */
function wireWords(words: readonly string[]): string {
  return words.map((word) => `$${Buffer.byteLength(word)}\r\n${word}\r\n`.toLowerCase()).join('');
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
 * proxy.dropNextCommand(['INCR', 'n']);
 * await redis.incr('n'); // runs once: the first never reached the server
 * ```
 */
export async function useDropProxy(upstreamUrl: string): Promise<DropProxy> {
  const upstream = new URL(upstreamUrl);
  /** Any connection's next reply. */
  let armed = false;
  /** The next matching command's reply, or the next matching command itself. */
  let replyTo: string | undefined;
  let commandOf: string | undefined;
  let dropped = 0;
  let droppedCommands = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const redis = connect(Number(upstream.port), upstream.hostname);
    for (const socket of [client, redis]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    /** This connection's next reply is lost (its command matched `replyTo`). */
    let dropReply = false;
    /** The end of the client's last chunk, so that a command split between chunks is still found. */
    let tail = '';
    const close = () => {
      client.destroy();
      redis.destroy();
    };
    client.on('close', close);
    redis.on('close', close);
    client.on('data', (chunk: Buffer) => {
      if (replyTo === undefined && commandOf === undefined) tail = '';
      else {
        const text = tail + chunk.toString('latin1').toLowerCase();
        tail = text.slice(-256);
        if (commandOf !== undefined && text.includes(commandOf)) {
          commandOf = undefined;
          dropped++;
          droppedCommands++;
          close();
          return;
        }
        if (replyTo !== undefined && text.includes(replyTo)) {
          replyTo = undefined;
          dropReply = true;
        }
      }
      redis.write(chunk);
    });
    redis.on('data', (chunk) => {
      if (armed || dropReply) {
        armed = false;
        dropReply = false;
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
    dropNextReply(command) {
      if (command === undefined) armed = true;
      else replyTo = wireWords(command);
    },
    dropNextCommand(command) {
      commandOf = wireWords(command);
    },
    get dropped() {
      return dropped;
    },
    get droppedCommands() {
      return droppedCommands;
    },
  };
}

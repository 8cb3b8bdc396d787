// MONITOR on a plain socket: every command a redis-server runs, as it runs it, with its database and source.
// ioredis's monitor mode is not used: it turns 'monitoring' only in a promise continuation after MONITOR's OK
// (and leaves it at disconnect), so a line that arrives in OK's chunk, or after disconnect, is taken for the reply
// to a command never sent ("Command queue state error").
import { connect } from 'node:net';

/** One command the server ran. */
export interface MonitorLine {
  /** The database it ran in. */
  db: number;
  /** Who sent it: a client's host:port, or 'lua' for a command a script (or function) ran. */
  source: string;
  /** The command and its arguments, as MONITOR quotes them (escapes left in). */
  args: string[];
}

export interface RedisMonitor {
  /** Stops monitoring (lines still in flight are dropped). */
  close(): void;
}

const HEADER = /^\+\d+\.\d+ \[(\d+) ([^\]]*)\] (.*)$/;
const ARGUMENT = /"((?:[^"\\]|\\.)*)"/g;

/**
 * Monitors the server at `url` (redis://host:port): resolves once MONITOR is on, then calls `onLine` for every
 * command the server runs.
 *
 * @example
 * ```ts
 * const monitor = await monitorRedis(server.url, ({ db, args }) => console.log(db, args[0]));
 * await redis.set('k', 'v'); // 0 set
 * monitor.close();
 * ```
 */
export async function monitorRedis(url: string, onLine: (line: MonitorLine) => void): Promise<RedisMonitor> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.setNoDelay(true);
  let buffered = '';
  let on = false;
  let closed = false;
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      if (closed) return;
      buffered += chunk.toString('latin1');
      let end = buffered.indexOf('\r\n');
      while (end >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        end = buffered.indexOf('\r\n');
        if (!on) {
          if (line !== '+OK') reject(new Error(`MONITOR answered ${line}`));
          on = true;
          resolve();
          continue;
        }
        const header = HEADER.exec(line);
        if (header === null) continue;
        const args = [...header[3]!.matchAll(ARGUMENT)].map((match) => match[1]!);
        onLine({ db: Number(header[1]), source: header[2]!, args });
      }
    });
    socket.write('MONITOR\r\n');
  });
  socket.on('error', () => undefined);
  return {
    close() {
      closed = true;
      socket.destroy();
    },
  };
}

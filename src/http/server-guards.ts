// What the Node server answers before Hono sees a request: methods the gateway cannot forward that Node's parser
// keeps from Hono (CONNECT goes to the 'connect' event; TRACK is not a method llhttp knows, so it is a parse
// error) get the same 405 as TRACE does in the app (gateway.ts refuseUnforwardable), and every other client
// error gets Node's own answer (400/408/413/431) and a close. Slow clients are bounded by the server timeouts
// in `server` (config), checked every second.
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Config } from '../config/schema.ts';

const BODY = JSON.stringify({ error: 'Method not allowed' });
const METHOD_NOT_ALLOWED =
  `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json\r\nContent-Length: ` +
  `${BODY.length}\r\nConnection: close\r\n\r\n${BODY}`;

/** Node's own answers to a client error (node:_http_server socketOnError), used when we do not answer 405. */
function nodeAnswer(code: string | undefined): string {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n';
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n';
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';
    default:
      return 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';
  }
}

/** The node:http server options that bound slow clients (headers, whole request, idle keep-alive). */
export function serverTimeouts(settings: Config['server']) {
  return {
    headersTimeout: settings.headersTimeoutMs,
    requestTimeout: settings.requestTimeoutMs,
    keepAliveTimeout: settings.keepAliveTimeoutMs,
    // Node checks the two timeouts above on this interval (default 30 s, which let slow-header clients live ~40 s).
    connectionsCheckingInterval: Math.min(1_000, settings.headersTimeoutMs),
  };
}

export function guardServer(server: Server): void {
  server.on('connect', (_request, socket: Duplex) => {
    socket.on('error', () => undefined);
    socket.end(METHOD_NOT_ALLOWED);
  });
  server.on('clientError', (error: Error & { code?: string; rawPacket?: Buffer }, socket: Duplex) => {
    socket.on('error', () => undefined);
    // Node's rule: answer only when no response of this connection has started (keep-alive sockets have sent some).
    const inFlight = (socket as Duplex & { _httpMessage?: { _headerSent?: boolean } | null })._httpMessage;
    const writable = socket.writable && !inFlight?._headerSent;
    if (writable) {
      const track = error.code === 'HPE_INVALID_METHOD' && error.rawPacket?.subarray(0, 6).toString('latin1') === 'TRACK ';
      socket.write(track ? METHOD_NOT_ALLOWED : nodeAnswer(error.code));
    }
    socket.destroy();
  });
}

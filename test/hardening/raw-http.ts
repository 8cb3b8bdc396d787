// HTTP requests that Node's fetch and http client refuse to send (bad bytes, broken framing, odd request lines),
// written straight to a socket, and a small keep-alive client for arbitrary but well-formed requests.
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';

export interface RawResponse {
  /** Status of the first final (non-1xx) response; undefined when the server closed without one. */
  status: number | undefined;
  text: string;
  timedOut: boolean;
}

function finalResponse(text: string): { status: number; complete: boolean } | undefined {
  let offset = 0;
  while (offset < text.length) {
    const match = /^HTTP\/1\.[01] (\d{3})/.exec(text.slice(offset));
    if (!match) return undefined;
    const headEnd = text.indexOf('\r\n\r\n', offset);
    if (headEnd < 0) return undefined;
    const status = Number(match[1]);
    if (status >= 100 && status < 200) {
      offset = headEnd + 4;
      continue;
    }
    const head = text.slice(offset, headEnd).toLowerCase();
    const body = text.slice(headEnd + 4);
    const length = /\r\ncontent-length: *(\d+)/.exec(head);
    if (length) return { status, complete: Buffer.byteLength(body, 'latin1') >= Number(length[1]) };
    if (/\r\ntransfer-encoding: *chunked/.test(head)) return { status, complete: body.includes('0\r\n\r\n') };
    return { status, complete: false };
  }
  return undefined;
}

/** Writes `payload` as is and reads until a final response is complete, the server closes, or the timeout. */
export function rawRequest(port: number, payload: string | Buffer, timeoutMs = 5_000): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let settled = false;
    const finish = (timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: finalResponse(text)?.status, text, timedOut });
    };
    const timer = setTimeout(() => finish(true), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (finalResponse(text)?.complete) finish(false);
    });
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
    socket.on('connect', () => socket.write(payload));
  });
}

export interface SimpleResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: 8 });

/** node:http request (header values may carry latin1 bytes, paths are sent as given). */
export function send(
  url: string,
  options: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer; timeoutMs?: number } = {},
): Promise<SimpleResponse> {
  const base = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: base.hostname,
        port: base.port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: options.headers,
        agent,
        timeout: options.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(options.body);
  });
}

export function closeAgent(): void {
  agent.destroy();
}

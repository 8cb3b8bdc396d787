// Odd HTTP clients: a chunked /v1/check body cut off is the client's fault (400 or a quiet close,
// logged at debug, never an error-level "unhandled error"); slow-header clients and idle keep-alive connections
// are closed by the configured server timeouts; TRACE, TRACK and CONNECT all get 405 (docs/security.md).
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { captureLog, startUpstream, type CapturedLog, type Upstream } from '../service/fixtures.ts';
import { rawRequest } from './raw-http.ts';

const HEADERS_TIMEOUT_MS = 1_000;
const KEEP_ALIVE_MS = 1_000;

/** Opens a connection, lets `drive` write to it, and resolves with what came back and when the server closed it. */
function session(
  port: number,
  drive: (write: (text: string) => void) => void,
  giveUpMs: number,
): Promise<{ text: string; closedAfterMs: number | undefined }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const started = performance.now();
    let text = '';
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closedAfterMs: closed ? performance.now() - started : undefined });
    };
    const timer = setTimeout(() => finish(false), giveUpMs);
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
    socket.on('connect', () => drive((t) => socket.writable && socket.write(t)));
  });
}

describe('odd HTTP clients', async () => {
  const redis = await useRedis();
  let upstream: Upstream;
  let service: RegionService;
  let port: number;
  let log: CapturedLog;

  beforeAll(async () => {
    upstream = await startUpstream();
    log = captureLog('debug');
    service = await startRegionService(
      parseConfig({
        region: 'edges',
        port: 0,
        redis: { url: redis.url, commandTimeoutMs: 2_000 },
        upstream: { url: upstream.url },
        server: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: 3_000, keepAliveTimeoutMs: KEEP_ALIVE_MS },
        rules: [{ name: 'per-key', by: ['apiKey'], limit: 100 }],
      }),
      { logger: log.logger, federation: false },
    );
    port = Number(new URL(service.url).port);
  });
  afterAll(async () => {
    await service?.close();
    await upstream?.close();
  });

  it('answers a chunked /v1/check body cut off with 400 or a quiet close, logged at debug', async () => {
    const head = 'POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"method":"GET"';
    // Half-close: the client still reads the answer.
    const halfClosed = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(head);
        setTimeout(() => socket.end(), 100);
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
      socket.on('close', () => resolve(text));
      socket.on('error', () => resolve(text));
    });
    expect(halfClosed === '' || /^HTTP\/1\.1 400 /.test(halfClosed), halfClosed).toBe(true);
    // Gone for good.
    await session(
      port,
      (write) => {
        write(head);
      },
      200,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const lines = log.lines();
    expect(lines.filter((line) => (line.level as number) >= 50)).toEqual([]);
    expect(lines.filter((line) => line.event === 'http.error')).toEqual([]);
    expect(lines.some((line) => line.event === 'http.client_aborted' && line.level === 20)).toBe(true);
    expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
  });

  it('closes a slow-header (slowloris) connection after headersTimeoutMs', async () => {
    const result = await session(
      port,
      (write) => {
        write('GET /x HTTP/1.1\r\nHost: x\r\n');
        let i = 0;
        const drip = setInterval(() => (i++ < 40 ? write(`X-Drip-${i}: a\r\n`) : clearInterval(drip)), 200);
        drip.unref();
      },
      8_000,
    );
    expect(result.closedAfterMs, 'the server never closed the slow connection').toBeDefined();
    // headersTimeout plus Node's check interval (1 s) and some scheduling slack on a loaded machine.
    expect(result.closedAfterMs!).toBeLessThan(HEADERS_TIMEOUT_MS + 2_500);
    expect(result.text).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('closes an idle keep-alive connection after keepAliveTimeoutMs', async () => {
    const result = await session(port, (write) => write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'), 8_000);
    expect(result.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(result.closedAfterMs).toBeDefined();
    expect(result.closedAfterMs!).toBeLessThan(KEEP_ALIVE_MS + 2_500);
  });

  it('answers TRACE, TRACK and CONNECT with 405 and forwards none of them', async () => {
    const before = upstream.seen.length;
    for (const request of [
      'TRACE /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'TRACK /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'CONNECT 127.0.0.1:6379 HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\n',
    ]) {
      const res = await rawRequest(port, request, 3_000);
      expect(res.status, request.split(' ')[0]).toBe(405);
    }
    expect(upstream.seen.length).toBe(before);
    // A method Node does not know at all is still Node's 400.
    expect((await rawRequest(port, 'BREW /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 3_000)).status).toBe(400);
  });
});

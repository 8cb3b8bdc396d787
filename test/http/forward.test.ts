// The gateway's forwarding on Node's own server (src/http/forward.ts), against a real Redis, a real upstream
// and a raw HTTP client (node:http, which neither decompresses nor hides headers): what reaches the upstream,
// what reaches the client, and what happens when the upstream is slow, dies mid-answer or streams while a
// concurrency slot is held.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { awayFromWindowEdge, eventually, seedConfig } from '../service/fixtures.ts';

interface Seen {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

const COMPRESSED = gzipSync(Buffer.from('{"compressed":true}'));

/** An upstream whose answer depends on the path. */
function upstreamHandler(seen: Seen[]) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      const path = (req.url ?? '').split('?')[0]!.replace(/^\/base/, '');
      if (path === '/slow') return; // never answers
      if (path === '/gzip') {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip', 'Content-Length': COMPRESSED.length });
        return res.end(COMPRESSED);
      }
      if (path === '/hop') {
        res.writeHead(201, 'Made', {
          Connection: 'X-Secret',
          'X-Secret': 'hop only',
          'Keep-Alive': 'timeout=5',
          'X-RateLimit-Limit': 'upstream says 1',
          'Set-Cookie': ['a=1', 'b=2'],
        });
        return res.end('made');
      }
      if (path === '/dies') {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.write('first half, ');
        setTimeout(() => res.socket?.destroy(), 50);
        return;
      }
      if (path === '/stream') {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.write('a');
        setTimeout(() => res.end('b'), 400);
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, bytes: chunks.reduce((n, c) => n + c.length, 0) }));
    });
  };
}

interface Answer {
  status?: number;
  statusMessage?: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
  error?: string;
}

function send(url: string, path: string, options: { method?: string; headers?: Record<string, string | number>; body?: Buffer } = {}) {
  return new Promise<Answer>((resolve) => {
    const req = request(`${url}${path}`, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      const done = (error?: string) =>
        resolve({ status: res.statusCode, statusMessage: res.statusMessage, headers: res.headers, body: Buffer.concat(chunks), error });
      res.on('end', () => done());
      res.on('error', (error) => done(error.message));
      res.on('aborted', () => done('aborted'));
    });
    req.on('error', (error) => resolve({ headers: {}, body: Buffer.alloc(0), error: error.message }));
    req.end(options.body);
  });
}

describe('gateway forwarding on Node (node:http, no fetch)', async () => {
  const redis = await useRedis();
  const seen: Seen[] = [];
  let upstream: Server;
  let service: RegionService;

  beforeAll(async () => {
    upstream = createServer(upstreamHandler(seen));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.upstream = { url: `http://127.0.0.1:${port}/base/`, timeoutMs: 300 };
        (raw.rules as unknown[]).push({
          name: 'one-stream',
          match: { endpoints: ['/stream'] },
          by: ['apiKey'],
          algorithm: 'concurrency',
          limit: 1,
          leaseTtl: '30s',
        });
      }),
    );
  });
  afterAll(async () => {
    await service?.close();
    upstream?.closeAllConnections();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  it('forwards path, query and body under the upstream base path, with X-Forwarded-* and without hop-by-hop headers', async () => {
    await awayFromWindowEdge();
    const body = Buffer.alloc(100_000, 7);
    const res = await send(service.url, '/items/Q?x=1&y=%20', {
      method: 'POST',
      headers: {
        'X-API-Key': 'fwd-1',
        'Content-Type': 'application/octet-stream',
        'Content-Length': body.length,
        Connection: 'keep-alive, X-Private',
        'X-Private': 'for this hop',
        'Proxy-Authorization': 'Basic secret',
        'X-Kept': 'yes',
      },
      body,
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toEqual({ path: '/base/items/q?x=1&y=%20', bytes: 100_000 });
    expect(res.headers['x-ratelimit-limit']).toBeDefined();
    const forwarded = seen.at(-1)!;
    expect(forwarded.body.equals(body)).toBe(true);
    expect(forwarded.headers['x-kept']).toBe('yes');
    expect(forwarded.headers['x-private']).toBeUndefined();
    expect(forwarded.headers['proxy-authorization']).toBeUndefined();
    expect(forwarded.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(forwarded.headers['x-forwarded-proto']).toBe('http');
    expect(forwarded.headers['x-forwarded-host']).toBe(new URL(service.url).host);
  });

  it('does not forward a GET body or its length (the upstream would wait for it)', async () => {
    const res = await send(service.url, '/items', {
      headers: { 'X-API-Key': 'fwd-2', 'Content-Length': 5 },
      body: Buffer.from('hello'),
    });
    expect(res.status).toBe(200);
    expect(seen.at(-1)!.headers['content-length']).toBeUndefined();
    expect(seen.at(-1)!.body.length).toBe(0);
  });

  it('passes compressed answers through byte for byte', async () => {
    const res = await send(service.url, '/gzip', { headers: { 'X-API-Key': 'fwd-3', 'Accept-Encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.body.equals(COMPRESSED)).toBe(true);
    expect(seen.at(-1)!.headers['accept-encoding']).toBe('gzip');
  });

  it("keeps the upstream's status, reason and repeated headers, drops its hop-by-hop ones and puts ours in place of its rate-limit headers", async () => {
    const res = await send(service.url, '/hop', { headers: { 'X-API-Key': 'fwd-4' } });
    expect(res.status).toBe(201);
    expect(res.statusMessage).toBe('Made');
    expect(res.body.toString()).toBe('made');
    expect(res.headers['x-secret']).toBeUndefined();
    expect(res.headers['keep-alive']).not.toBe('timeout=5');
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(res.headers['x-ratelimit-limit']).toMatch(/^\d+$/);
    expect(res.headers.ratelimit).toMatch(/;r=\d+;t=\d+$/);
  });

  it('answers 504 with the JSON error and the rate-limit headers when the upstream does not answer in time', async () => {
    const started = Date.now();
    const res = await send(service.url, '/slow', { headers: { 'X-API-Key': 'fwd-5' } });
    expect(res.status).toBe(504);
    expect(JSON.parse(res.body.toString())).toEqual({ error: 'Upstream timed out' });
    expect(res.headers['x-ratelimit-limit']).toMatch(/^\d+$/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('breaks the answer when the upstream dies mid-answer (the client never waits for the rest)', async () => {
    const res = await send(service.url, '/dies', { headers: { 'X-API-Key': 'fwd-6' } });
    expect(res.status).toBe(200);
    expect(res.error).toBeDefined();
    expect(res.body.toString()).toBe('first half, ');
  });

  it('holds a concurrency slot until the streamed answer ends, then releases it', async () => {
    const headers = { 'X-API-Key': 'fwd-7' };
    const first = send(service.url, '/stream', { headers });
    await eventually(() => seen.some((entry) => entry.path === '/base/stream'), 5_000, 'the first stream reaches the upstream');
    const second = await send(service.url, '/stream', { headers });
    expect(second.status).toBe(429);
    const done = await first;
    expect(done.status).toBe(200);
    expect(done.body.toString()).toBe('ab');
    await eventually(async () => (await send(service.url, '/stream', { headers })).status === 200, 5_000, 'the slot is free again');
  });
});

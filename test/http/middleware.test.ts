// The exported Hono middleware on a tiny app: a few lines embed the limiter, denied requests never reach the
// handler, and concurrency leases are returned once the response body has been sent.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from '../harness/redis.ts';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady, type RegionRedis } from '../../src/store/client.ts';
import { createResilientEngine, type ResilientEngine } from '../../src/engine/resilient.ts';
import { quotafed } from '../../src/http/middleware.ts';
import type { QuotafedEnv } from '../../src/http/env.ts';
import { silentLogger } from '../../src/log.ts';

describe('quotafed() middleware', async () => {
  const server = await useRedis();
  let redis: RegionRedis;
  let engine: ResilientEngine;
  let handled = 0;
  let app: Hono<QuotafedEnv>;
  let release: (() => void) | undefined;

  beforeAll(async () => {
    const config = parseConfig({
      region: 'embedded',
      redis: { url: server.url, commandTimeoutMs: 1_000 },
      rules: [
        { name: 'per-user', by: ['apiKey'], match: { identity: 'apiKey' }, algorithm: 'fixedWindow', limit: 3, period: '1h' },
        { name: 'per-ip', by: ['ip'], match: { identity: 'anonymous' }, algorithm: 'fixedWindow', limit: 1, period: '1h' },
        { name: 'one-report', by: ['apiKey'], match: { identity: 'apiKey', endpoints: ['/report'] }, algorithm: 'concurrency', limit: 1 },
      ],
    });
    redis = createRegionRedis(config);
    await waitReady(redis);
    engine = createResilientEngine({
      config,
      inner: createRedisEngine({ config, redis }),
      probe: () => redis.ping(),
      logger: silentLogger(),
    });

    // The embedding, as a user would write it; identify() supplies the client IP (app.request has no socket).
    app = new Hono<QuotafedEnv>();
    app.use(
      '*',
      quotafed({ engine, identify: (c) => ({ apiKey: c.req.header('x-user'), ip: '192.0.2.7', method: c.req.method, path: c.req.path }) }),
    );
    app.get('/hello', (c) => {
      handled += 1;
      return c.json({ hello: 'world', remaining: c.get('quotafed').binding?.remaining });
    });
    app.get('/report', (c) => {
      handled += 1;
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('part 1\n'));
          release = () => controller.close();
        },
      });
      return c.body(body, 200, { 'Content-Type': 'text/plain' });
    });
  });
  afterAll(async () => {
    await engine?.close();
    redis?.disconnect();
  });

  it('admits up to the limit with headers, then answers 429 without calling the handler', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await app.request('/hello', { headers: { 'X-User': 'alice' } });
      statuses.push(res.status);
      if (res.status === 200) {
        expect(res.headers.get('x-ratelimit-limit')).toBe('3');
        expect(((await res.json()) as { hello: string }).hello).toBe('world');
      } else {
        expect(await res.text()).toBe('{"error":"Rate limit exceeded"}');
      }
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(handled).toBe(3);
    // Anonymous callers fall under the per-IP rule.
    expect((await app.request('/hello')).status).toBe(200);
    expect((await app.request('/hello')).status).toBe(429);
  });

  it('takes an identify that answers with a promise: of a request (decided) or of a Response (answered as it is)', async () => {
    const asyncApp = new Hono<QuotafedEnv>();
    asyncApp.use(
      '*',
      quotafed({
        engine,
        identify: async (c) => {
          await new Promise((resolve) => setTimeout(resolve, 1));
          const user = c.req.header('x-user');
          if (user === undefined) return c.json({ error: 'who are you?' }, 401);
          return { apiKey: user, ip: '192.0.2.9', method: c.req.method, path: c.req.path };
        },
      }),
    );
    asyncApp.get('/hello', (c) => c.json({ remaining: c.get('quotafed').binding?.remaining }));
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await asyncApp.request('/hello', { headers: { 'X-User': 'dave' } })).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const anonymous = await asyncApp.request('/hello');
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual({ error: 'who are you?' });
    expect(anonymous.headers.get('x-ratelimit-limit')).toBeNull();
  });

  it('holds a concurrency slot until the streamed body ends', async () => {
    const first = await app.request('/report', { headers: { 'X-User': 'bob' } });
    expect(first.status).toBe(200);
    const reader = first.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('part 1\n');

    // The handler returned, but the body is still streaming: the slot is taken.
    expect((await app.request('/report', { headers: { 'X-User': 'bob' } })).status).toBe(429);

    release!();
    expect((await reader.read()).done).toBe(true);
    // Release is asynchronous (one Redis call); give it a bounded moment.
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 20));
      const again = await app.request('/report', { headers: { 'X-User': 'bob' } });
      status = again.status;
      if (status === 200) {
        const r = again.body!.getReader();
        await r.read();
        release!();
        await r.read();
      }
    }
    expect(status).toBe(200);
  });

  it("on a Node server, puts the headers on the handler's own answer and on an upstream fetch() answer alike", async () => {
    const upstream: Server = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain', 'X-From': 'upstream' });
      res.end('from upstream');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const node = new Hono<QuotafedEnv>();
    node.use(
      '*',
      quotafed({ engine, identify: (c) => ({ apiKey: c.req.header('x-user'), ip: '192.0.2.8', method: c.req.method, path: c.req.path }) }),
    );
    node.get('/hello', (c) => c.json({ hello: 'node' }));
    // fetch()'s Response has immutable headers: the middleware answers a copy with the headers added.
    node.get('/proxied', () => fetch(`${upstreamUrl}/`));
    const listening = await new Promise<Server>((resolve) => {
      const started = serve({ fetch: node.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(started as Server)) as Server;
    });
    const base = `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
    // Raw node:http, so the bytes on the wire are what is checked (Content-Length included).
    const get = (path: string) =>
      new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>((resolve, reject) => {
        httpRequest(`${base}${path}`, { headers: { 'X-User': 'carol' } }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        })
          .on('error', reject)
          .end();
      });
    try {
      const own = await get('/hello');
      expect(own.status).toBe(200);
      expect(own.body).toBe('{"hello":"node"}');
      expect(own.headers['content-length']).toBe(String(own.body.length));
      expect(own.headers['content-type']).toMatch(/^application\/json/);
      expect(own.headers['x-ratelimit-limit']).toBe('3');
      expect(own.headers['x-ratelimit-remaining']).toBe('2');
      expect(own.headers.ratelimit).toMatch(/^"per-user";r=2;t=\d+$/);

      const proxied = await get('/proxied');
      expect(proxied.status).toBe(200);
      expect(proxied.body).toBe('from upstream');
      expect(proxied.headers['x-from']).toBe('upstream');
      expect(proxied.headers['x-ratelimit-remaining']).toBe('1');
    } finally {
      await new Promise((resolve) => listening.close(resolve));
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});

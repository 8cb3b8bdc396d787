// One HTTP server under test, in its own process: `tsx bench/http/server.ts <mode> <options json>`.
// Prints `READY <url>` on stdout when it listens, and stops on SIGTERM.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { proxy } from 'hono/proxy';
import { Redis } from 'ioredis';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { ConfigInput } from '../../src/config/schema.ts';
import { parseConfig } from '../../src/config/load.ts';
import { startDemoUpstream } from '../../src/demo/upstream.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import { checkAnswer, writeAnswer } from '../../src/http/check.ts';
import { quotafed } from '../../src/http/middleware.ts';
import { silentLogger } from '../../src/log.ts';
import { serveClustered } from '../../src/ops/cluster-mode.ts';
import { startRegionService } from '../../src/service.ts';
import { tuneV8 } from '../../src/v8-tuning.ts';

export type ServerMode = 'upstream' | 'bare' | 'bare-proxy' | 'rlf' | 'rlf-check' | 'middleware' | 'service';

export interface ServerOptions {
  redisUrl?: string;
  upstreamUrl?: string;
  /** service mode: the quotafed config (port, Redis URL and command timeout are filled in; a keyPrefix is kept). */
  config?: Omit<ConfigInput, 'redis'> & { redis?: { keyPrefix?: string } };
  /** service mode: inner engine without the over-limit cache. */
  noCache?: boolean;
  /** service mode: run with node:cluster on this many workers. */
  workers?: number;
  /** Limit per API key for the rlf and middleware apps. */
  limit?: number;
}

const BODY = JSON.stringify({ ok: true });

/** /v1/check's answer for the seed rule (1,000/min per API key, token bucket) denying a key, as quotafed writes it. */
function deniedAnswer(): { headers: Record<string, string>; json: string } {
  const at = Date.now();
  const outcome = {
    rule: 'per-key',
    algorithm: 'tokenBucket',
    allowed: false,
    limit: 1000,
    remaining: 0,
    resetAtMs: at + 60_000,
    retryAfterMs: 60,
    periodMs: 60_000,
    shadow: false,
    source: 'cache',
    failMode: 'open',
  } as const;
  return checkAnswer({ allowed: false, binding: outcome, leases: [], outcomes: [outcome] }, at);
}

function apiKeyOf(authorization: string | undefined): string {
  return authorization?.replace(/^Bearer\s+/i, '') ?? 'anonymous';
}

function listen(app: Hono): Promise<Server> {
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(server as Server)) as Server;
  });
}

const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function start(mode: ServerMode, options: ServerOptions): Promise<{ url: string; close(): Promise<void> }> {
  switch (mode) {
    case 'upstream': {
      const upstream = await startDemoUpstream({ port: 0 });
      return { url: upstream.url, close: () => upstream.close() };
    }
    case 'bare': {
      // The baseline: what Hono costs with no limiter. GET answers a small JSON; POST /v1/check parses its JSON
      // body and answers a JSON decision, so it does the same HTTP and JSON work as quotafed's /v1/check.
      const app = new Hono();
      app.post('/v1/check', async (c) => {
        const body = (await c.req.json()) as { apiKey?: string };
        return c.json({ allowed: true, status: 200, rule: body.apiKey ? 'per-key' : null });
      });
      // The answer quotafed's /v1/check writes for a hot key over its limit (its headers and documented JSON, built
      // once), written by /v1/check's own writer: what HTTP, the JSON body and that answer cost with no limiter at all.
      const denied = deniedAnswer();
      app.post('/v1/answer', async (c) => {
        await c.req.json();
        return writeAnswer(c, denied.headers, denied.json);
      });
      // What reading the caller's identity costs: through Hono (which makes @hono/node-server build a full
      // web Request) and straight from Node's IncomingMessage (c.env.incoming), which does not.
      app.get('/auth-hono/*', (c) =>
        c.body(apiKeyOf(c.req.header('authorization')) ? BODY : '{}', 200, { 'content-type': 'application/json' }),
      );
      app.get('/auth-node/*', (c) => {
        const incoming = (c.env as { incoming: { headers: Record<string, string | undefined> } }).incoming;
        return c.body(apiKeyOf(incoming.headers.authorization) ? BODY : '{}', 200, { 'content-type': 'application/json' });
      });
      app.get('*', (c) => c.body(BODY, 200, { 'content-type': 'application/json' }));
      const server = await listen(app);
      return { url: urlOf(server), close: () => new Promise((resolve) => server.close(() => resolve())) };
    }
    case 'bare-proxy': {
      const base = options.upstreamUrl!;
      const app = new Hono();
      app.all('*', (c) => proxy(`${base}${c.req.path}`, { headers: c.req.header() }));
      const server = await listen(app);
      return { url: urlOf(server), close: () => new Promise((resolve) => server.close(() => resolve())) };
    }
    case 'rlf': {
      // Hono with rate-limiter-flexible as middleware, as its README suggests for other frameworks.
      const redis = new Redis(options.redisUrl!, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
      await new Promise((resolve) => redis.once('ready', resolve));
      const limiter = new RateLimiterRedis({ storeClient: redis, points: options.limit ?? 1_000_000_000, duration: 60, keyPrefix: 'rlf' });
      const app = new Hono();
      app.use('*', async (c, next) => {
        try {
          const res = await limiter.consume(apiKeyOf(c.req.header('authorization')));
          c.header('X-RateLimit-Remaining', String(res.remainingPoints));
        } catch (rejection) {
          if (!(rejection instanceof RateLimiterRes)) throw rejection;
          return c.json({ error: 'Rate limit exceeded' }, 429, { 'Retry-After': String(Math.ceil(rejection.msBeforeNext / 1000)) });
        }
        await next();
      });
      app.get('*', (c) => c.body(BODY, 200, { 'content-type': 'application/json' }));
      const server = await listen(app);
      return {
        url: urlOf(server),
        close: async () => {
          await new Promise((resolve) => server.close(() => resolve(undefined)));
          await redis.quit();
        },
      };
    }
    case 'rlf-check': {
      // What a Node user would write today for POST /v1/check: Hono, the JSON body, rate-limiter-flexible's
      // RateLimiterRedis on ioredis (defaults) keyed by the body's API key, and the same JSON answer shape and
      // X-RateLimit-* headers as quotafed's /v1/check (HTTP 200; `status` says what to answer the client).
      const limit = options.limit ?? 1000;
      const redis = new Redis(options.redisUrl!, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
      await new Promise((resolve) => redis.once('ready', resolve));
      const limiter = new RateLimiterRedis({ storeClient: redis, points: limit, duration: 60, keyPrefix: 'rlf' });
      const app = new Hono();
      app.post('/v1/check', async (c) => {
        const body = (await c.req.json()) as { apiKey?: string; ip?: string };
        let result: RateLimiterRes;
        let allowed = true;
        try {
          result = await limiter.consume(body.apiKey ?? body.ip ?? 'anonymous');
        } catch (rejection) {
          if (!(rejection instanceof RateLimiterRes)) throw rejection;
          result = rejection;
          allowed = false;
        }
        const reset = Math.ceil(result.msBeforeNext / 1000);
        const headers: Record<string, string> = {
          'X-RateLimit-Limit': String(limit),
          'X-RateLimit-Remaining': String(result.remainingPoints),
          'X-RateLimit-Reset': String(reset),
        };
        if (!allowed) headers['Retry-After'] = String(Math.max(1, reset));
        return c.json(
          {
            allowed,
            status: allowed ? 200 : 429,
            limit,
            remaining: result.remainingPoints,
            reset,
            retryAfter: allowed ? null : Math.max(1, reset),
            rule: 'per-key',
            headers,
          },
          200,
          headers,
        );
      });
      const server = await listen(app);
      return {
        url: urlOf(server),
        close: async () => {
          await new Promise((resolve) => server.close(() => resolve(undefined)));
          await redis.quit();
        },
      };
    }
    case 'middleware': {
      // Hono with quotafed's exported middleware on the bare Redis engine: like for like with the rlf app. The app
      // starts as the README's "Embedding the middleware" says a process that decides in-process should (tuneV8).
      tuneV8();
      const config = parseConfig({
        region: 'bench',
        logLevel: 'silent',
        redis: { url: options.redisUrl!, commandTimeoutMs: 2_000 },
        rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: options.limit ?? 1_000_000_000, period: '1m' }],
      });
      const redis = createRegionRedis(config);
      await waitReady(redis);
      const engine = createRedisEngine({ config, redis });
      const app = new Hono();
      app.use('*', quotafed({ engine }) as never);
      app.get('*', (c) => c.body(BODY, 200, { 'content-type': 'application/json' }));
      const server = await listen(app);
      return {
        url: urlOf(server),
        close: async () => {
          await new Promise((resolve) => server.close(() => resolve(undefined)));
          await redis.quit();
        },
      };
    }
    case 'service': {
      const config = parseConfig({
        ...options.config,
        port: options.config?.port ?? 0,
        logLevel: 'silent',
        redis: { ...options.config?.redis, url: options.redisUrl!, commandTimeoutMs: 2_000 },
      });
      const service = await startRegionService(config, {
        logger: silentLogger(),
        ...(options.noCache
          ? { createEngine: ({ config: c, redis }) => createRedisEngine({ config: c, redis, overLimitCache: false }) }
          : {}),
      });
      return { url: service.url, close: () => service.close() };
    }
  }
}

async function main(): Promise<void> {
  const mode = process.argv[2] as ServerMode;
  // The bench holds our stdin open; when it goes away (even killed), stop rather than linger.
  process.stdin.resume();
  process.stdin.once('end', () => process.kill(process.pid, 'SIGTERM'));
  const options = JSON.parse(process.argv[3] ?? '{}') as ServerOptions;
  if (options.workers && options.workers > 1) {
    const code = await serveClustered({
      workers: options.workers,
      logger: silentLogger(),
      start: () => start(mode, options),
      onListening: ({ port }) => process.stdout.write(`READY http://127.0.0.1:${port}\n`),
    });
    process.exit(code);
  }
  const server = await start(mode, options);
  process.stdout.write(`READY ${server.url}\n`);
  process.once('SIGTERM', () => {
    server.close().finally(() => process.exit(0));
  });
}

await main();

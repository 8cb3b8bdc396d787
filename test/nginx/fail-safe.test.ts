// Debian's nginx with the documented template in front of an upstream while quotafed itself does not
// answer: frozen (SIGSTOP: connections are accepted, nothing is read) and stopped (connections refused). Each
// QUOTAFED_UNAVAILABLE choice is rendered into its own nginx: `open` forwards unlimited and says so, `closed`
// answers 503 with Retry-After; either answers within the subrequest's read timeout instead of nginx's 60 s
// defaults, and quotafed's own 400 (a path with no canonical form) stands in both. quotafed runs as its own
// `quotafed serve` process on a real redis-server.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { freePort } from '../../src/ops/redis-process.ts';
import { startServiceProcess, type ServiceProcess } from '../../src/ops/service-process.ts';
import { useRedis } from '../harness/redis.ts';
import { startUpstream, type Upstream } from '../service/fixtures.ts';
import { nginxAvailable, startNginx, type NginxProcess } from '../support/nginx.ts';

const HAVE_NGINX = nginxAvailable();
if (!HAVE_NGINX) console.warn('test/nginx/fail-safe.test.ts skipped: no `nginx` binary on PATH (apt-get install nginx)');

/** The template's proxy_read_timeout (1 s) plus room for a loaded 2-core machine; nginx's default would be 60 s. */
const ANSWER_BOUND_MS = 3_000;

describe.skipIf(!HAVE_NGINX)('nginx in front of a quotafed that does not answer', async () => {
  const redis = await useRedis();
  const dir = mkdtempSync(join(tmpdir(), 'qf-nginx-fail-'));
  let upstream: Upstream;
  let service: ServiceProcess;
  let open: NginxProcess;
  let closed: NginxProcess;

  beforeAll(async () => {
    upstream = await startUpstream();
    const port = await freePort();
    const configPath = join(dir, 'region.yaml');
    writeFileSync(
      configPath,
      stringify({
        region: 'nginx-fail',
        port,
        logLevel: 'warn',
        redis: { url: redis.url },
        rules: [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 1000, period: '1m' }],
      }),
    );
    service = await startServiceProcess({
      region: 'nginx-fail',
      configPath,
      port,
      root: fileURLToPath(new URL('../../', import.meta.url)),
      write: () => undefined,
    });
    const addresses = { QUOTAFED_ADDR: new URL(service.url).host, API_ADDR: new URL(upstream.url).host };
    open = await startNginx({ ...addresses, QUOTAFED_UNAVAILABLE: 'open' });
    closed = await startNginx({ ...addresses, QUOTAFED_UNAVAILABLE: 'closed' });
  }, 60_000);
  afterAll(async () => {
    if (service?.pid !== undefined && service.running()) process.kill(service.pid, 'SIGCONT');
    await open?.stop();
    await closed?.stop();
    await service?.stop();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const timed = async (nginx: NginxProcess, path = '/items') => {
    const started = performance.now();
    const res = await fetch(`${nginx.url}${path}`, { headers: { 'X-API-Key': 'fail-safe-key' } });
    const body = await res.text();
    return { res, body, ms: performance.now() - started };
  };

  const expectOpen = async () => {
    const { res, body, ms } = await timed(open);
    expect(res.status).toBe(200);
    expect(JSON.parse(body)).toEqual({ upstream: true, path: '/items' });
    expect(res.headers.get('x-ratelimit-degraded')).toBe('quotafed-unavailable');
    expect(res.headers.get('x-ratelimit-remaining')).toBeNull();
    expect(ms).toBeLessThan(ANSWER_BOUND_MS);
  };
  const expectClosed = async () => {
    const before = upstream.seen.length;
    const { res, body, ms } = await timed(closed);
    expect(res.status).toBe(503);
    expect(body).toBe('{"error":"Rate limiter unavailable"}');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(ms).toBeLessThan(ANSWER_BOUND_MS);
    expect(upstream.seen.length).toBe(before);
  };

  it('decides through quotafed while it answers, in both modes; its 400 stands', async () => {
    for (const nginx of [open, closed]) {
      const { res } = await timed(nginx);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
      expect(res.headers.get('x-ratelimit-degraded')).toBeNull();
      // An encoded slash has no canonical form: quotafed refuses it, and fail-open does not let it through.
      const refused = await timed(nginx, '/items/a%2Fb');
      expect(refused.res.status).toBe(400);
    }
  });

  it('answers by the chosen mode within the read timeout while quotafed is frozen (SIGSTOP)', async () => {
    process.kill(service.pid!, 'SIGSTOP');
    try {
      await expectOpen();
      await expectClosed();
      await expectOpen();
    } finally {
      process.kill(service.pid!, 'SIGCONT');
    }
    const { res } = await timed(closed);
    expect(res.status).toBe(200);
  });

  it('answers by the chosen mode at once while quotafed is stopped', async () => {
    await service.stop();
    await expectOpen();
    await expectClosed();
    expect(open.stderr()).not.toMatch(/\[(emerg|alert)\]/);
    expect(closed.stderr()).not.toMatch(/\[(emerg|alert)\]/);
  });
});

// What the operator docs and shipped files say, checked against what the code does: the standalone region's
// command timeout, the README's embedding examples (run against a real redis-server), peers' Redis URLs from
// the environment, where /dashboard lives with admin.port, and no internal tracker numbers in user docs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.ts';
import { Config } from '../../src/config/schema.ts';
import type { QuotafedEnv } from '../../src/http/env.ts';
import { quotafed } from '../../src/http/middleware.ts';
import { silentLogger } from '../../src/log.ts';
import { createRegionEngine, startRegionService } from '../../src/service.ts';
import { useRedis } from '../harness/redis.ts';
import { seedConfig } from '../service/fixtures.ts';

const root = new URL('../../', import.meta.url).pathname;
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const redis = await useRedis();

describe('regions/standalone.yaml', () => {
  it('uses the default command timeout, not the old 50 ms that timed out decisions at saturation', () => {
    const config = loadConfigFile(join(root, 'regions/standalone.yaml'), {});
    expect(config.redis.commandTimeoutMs).toBe(
      Config.parse({ region: 'x', rules: [{ name: 'r', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1 }] }).redis.commandTimeoutMs,
    );
    expect(config.redis.commandTimeoutMs).toBe(500);
  });
});

describe("the README's embedding example", () => {
  const readme = read('README.md');
  const section = readme.slice(readme.indexOf('### Embedding the middleware'));

  it('gives createRegionEngine a config without peers, and shows startRegionService for a federated region', () => {
    const file = /createRegionEngine\(loadConfigFile\('([^']+)'\)\)/.exec(section)?.[1];
    expect(file).toBeDefined();
    expect(loadConfigFile(join(root, file!), {}).federation.peers).toEqual([]);
    expect(section).toMatch(/startRegionService\(loadConfigFile\('regions\/us-east\.yaml'\)\)/);
    expect(section).toMatch(/quotafed\(\{ engine: region\.engine \}\)/);
  });

  it('runs as written against a real redis-server (the standalone config, its Redis from the environment)', async () => {
    const { engine, close } = await createRegionEngine(
      loadConfigFile(join(root, 'regions/standalone.yaml'), { QUOTAFED_REDIS_URL: redis.url }),
      { logger: silentLogger() },
    );
    try {
      const app = new Hono<QuotafedEnv>();
      app.use('/api/*', quotafed({ engine }));
      app.get('/api/search', (c) => c.json({ remaining: c.get('quotafed').binding?.remaining }));
      const response = await app.request('/api/search', { headers: { 'X-API-Key': 'readme-embed' } });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ remaining: 999 }); // per-key, 1,000 per minute (/api/search is not /search)
    } finally {
      await close();
    }
  });
});

describe("peers' Redis URLs from the environment", () => {
  it('QUOTAFED_PEER_<NAME>_REDIS_URL sets a peer, and the docs and compose file say so', () => {
    const config = loadConfigFile(join(root, 'regions/us-east.yaml'), {
      QUOTAFED_PEER_EU_WEST_REDIS_URL: 'rediss://gossip:pw@redis.eu-west.internal:6380',
    });
    expect(config.federation.peers.find((peer) => peer.name === 'eu-west')?.redisUrl).toBe(
      'rediss://gossip:pw@redis.eu-west.internal:6380',
    );
    for (const file of ['docs/operations.md', 'docker-compose.yml']) {
      const text = read(file).replace(/\s+/g, ' ');
      expect(text, file).not.toMatch(/cannot (be set|come) from the environment|have no environment override/);
      expect(text, file).toContain('QUOTAFED_PEER_<NAME>_REDIS_URL');
    }
  });
});

describe('/dashboard with admin.port', () => {
  it('moves to the admin listener, as docs/security.md says', async () => {
    const service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.admin = { port: 0, token: 'dashboard-docs-token-0123' };
      }),
      { logger: silentLogger() },
    );
    try {
      expect((await fetch(`${service.adminUrl}/dashboard`)).status).toBe(200);
      expect((await fetch(`${service.url}/dashboard`)).status).not.toBe(200);
    } finally {
      await service.close();
    }
    const security = read('docs/security.md').replace(/\s+/g, ' ');
    expect(security).not.toMatch(/\/dashboard` stays public/);
    expect(security).toMatch(/with it both move to the admin listener/);
  });
});

describe('user docs', () => {
  it('name no internal tracker numbers', () => {
    for (const file of ['docs/operations.md', 'docs/security.md']) expect(read(file), file).not.toMatch(/\bissue \d+/i);
  });

  it('run serve in a form a supervisor can stop', () => {
    for (const file of ['README.md', 'docs/operations.md', 'docker-compose.yml', 'regions/standalone.yaml']) {
      const uses = read(file)
        .split('\n')
        .filter((line) => /npx quotafed serve/.test(line) && !/do not forward SIGTERM|never `npx quotafed serve`/.test(line));
      expect(uses, file).toEqual([]);
    }
  });
});

// docker-compose.yml and the Dockerfile cannot be run here (no Docker engine), so they are checked statically:
// the compose file against the official Compose Specification schema, and every regional service's config,
// with the environment compose gives it, through the same loader the service uses.
//
// test/ops/compose-spec.json is the Compose Specification JSON schema (compose-spec/compose-spec,
// schema/compose-spec.json, draft-07 edition), vendored verbatim from the copy the npm package
// docker-compose@1.5.0 ships in schema/compose-spec.json (installed here as a testcontainers dependency).
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';

const root = new URL('../../', import.meta.url).pathname;
const read = (path: string) => readFileSync(join(root, path), 'utf8');

type Service = {
  image?: string;
  build?: unknown;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  configs?: Array<{ source: string; target: string }>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
};
type Compose = { services: Record<string, Service>; configs: Record<string, { content: string }> };

/** Compose's `${NAME:-default}` interpolation, enough for this file. */
function interpolate(text: string, env: Record<string, string>): string {
  return text.replace(/\$\{([A-Z0-9_]+)(?::-([^}]*))?\}/g, (_, name: string, fallback: string | undefined) => env[name] ?? fallback ?? '');
}

const composeText = read('docker-compose.yml');
const compose = parseYaml(interpolate(composeText, {}), { merge: true }) as Compose;
const regions = ['us-east', 'eu-west', 'ap-south'];

describe('docker-compose.yml', () => {
  it('is valid against the Compose Specification schema', () => {
    const schema = JSON.parse(read('test/ops/compose-spec.json')) as object;
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
    // The schema names draft-07 by its https URI; Ajv knows the same meta-schema under its http id.
    const draft7 = createRequire(import.meta.url)('ajv/dist/refs/json-schema-draft-07.json') as Record<string, unknown>;
    ajv.addMetaSchema({ ...draft7, $id: (schema as { $schema: string }).$schema });
    const validate = ajv.compile(schema);
    // Validated as written (variables unexpanded, merge keys resolved), as `docker compose config` reads it.
    const raw = parseYaml(composeText, { merge: true }) as unknown;
    const valid = validate(raw);
    expect(validate.errors ?? []).toEqual([]);
    expect(valid).toBe(true);

    // The schema really is checking: a misspelt service key is refused.
    const broken = structuredClone(raw) as Compose;
    (broken.services['us-east'] as Record<string, unknown>).enviroment = {};
    expect(validate(broken)).toBe(false);
  });

  it('has three Redis servers, Toxiproxy, the demo upstream and three regional services', () => {
    expect(Object.keys(compose.services).sort()).toEqual([
      'ap-south',
      'eu-west',
      'redis-ap-south',
      'redis-eu-west',
      'redis-us-east',
      'toxiproxy',
      'upstream',
      'us-east',
    ]);
    expect(compose.services.toxiproxy!.image).toMatch(/^ghcr\.io\/shopify\/toxiproxy:/);
    expect(compose.services.upstream!.entrypoint).toEqual(['node', 'dist/demo/upstream.js']);
    // Host ports match `npm start`, on loopback only, and never collide.
    const published = Object.values(compose.services).flatMap((service) => service.ports ?? []);
    expect(published.every((port) => port.startsWith('127.0.0.1:'))).toBe(true);
    expect(new Set(published.map((port) => port.split(':')[1])).size).toBe(published.length);
    expect(regions.map((region) => compose.services[region]!.ports)).toEqual([
      ['127.0.0.1:8081:8080'],
      ['127.0.0.1:8082:8080'],
      ['127.0.0.1:8083:8080'],
    ]);
    for (const service of Object.values(compose.services)) {
      for (const dependency of Object.keys(service.depends_on ?? {})) expect(compose.services).toHaveProperty(dependency);
      for (const config of service.configs ?? []) expect(compose.configs).toHaveProperty(config.source);
    }
  });

  it('routes every cross-region link through its own Toxiproxy proxy', () => {
    const proxies = JSON.parse(compose.configs['toxiproxy-links']!.content) as Array<{ name: string; listen: string; upstream: string }>;
    expect(proxies).toHaveLength(6);
    expect(new Set(proxies.map((proxy) => proxy.listen)).size).toBe(6);
    for (const from of regions) {
      for (const to of regions.filter((region) => region !== from)) {
        const proxy = proxies.find((candidate) => candidate.name === `${from}-to-${to}`);
        expect(proxy?.upstream).toBe(`redis-${to}:6379`);
      }
    }
  });

  describe.each(regions)('service %s', (region) => {
    const service = compose.services[region]!;
    const env = service.environment!;
    const mounted = service.configs![0]!;
    const dir = mkdtempSync(join(tmpdir(), 'quotafed-compose-'));
    const configPath = join(dir, `${region}.yaml`);
    writeFileSync(configPath, compose.configs[mounted.source]!.content);

    it('loads its mounted config with its environment into a valid config', () => {
      expect(env.QUOTAFED_CONFIG).toBe(mounted.target);
      const config = loadConfigFile(configPath, env);
      expect(config.region).toBe(region);
      expect(config.host).toBe('0.0.0.0');
      expect(config.port).toBe(8080);
      expect(config.redis.url).toBe(`redis://redis-${region}:6379`);
      expect(compose.services).toHaveProperty(`redis-${region}`);
      expect(config.upstream.url).toBe('http://upstream:8090');
      expect(compose.services.upstream!.command).toEqual(['--host', '0.0.0.0', '--port', '8090']);
      expect(config.federation.secret).toBe('compose-demo-secret-change-me');
      // Peers are reached through the proxy of this direction of the link.
      const proxies = JSON.parse(compose.configs['toxiproxy-links']!.content) as Array<{ name: string; listen: string }>;
      for (const peer of config.federation.peers) {
        const proxy = proxies.find((candidate) => candidate.name === `${region}-to-${peer.name}`)!;
        expect(peer.redisUrl).toBe(`redis://toxiproxy:${proxy.listen.split(':')[1]}`);
      }
    });

    it('enforces the same policy as regions/*.yaml', () => {
      const local = loadConfigFile(join(root, 'regions', `${region}.yaml`), {});
      const composed = loadConfigFile(configPath, env);
      expect(composed.rules).toEqual(local.rules);
      expect(composed.federation.syncIntervalMs).toBe(local.federation.syncIntervalMs);
      expect(composed.federation.leakageBudget).toEqual(local.federation.leakageBudget);
      expect(composed.federation.peers.map((peer) => [peer.name, peer.weight])).toEqual(
        local.federation.peers.map((peer) => [peer.name, peer.weight]),
      );
      expect(composed.identity).toEqual(local.identity);
    });

    it('also turns regions/<region>.yaml into a valid config with the same environment', () => {
      const config = loadConfigFile(join(root, 'regions', `${region}.yaml`), {
        ...env,
        QUOTAFED_FEDERATION_SECRET: 'a-secret-from-the-shell-0123',
      });
      expect(config.redis.url).toBe(`redis://redis-${region}:6379`);
      expect(config.port).toBe(8080);
      expect(config.host).toBe('0.0.0.0');
      expect(config.federation.secret).toBe('a-secret-from-the-shell-0123');
    });
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const stages = dockerfile.split(/^FROM /m).slice(1);

  it('is multi-stage on node:24-slim and installs only runtime dependencies in the runtime stage', () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-slim$/m);
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const runtime = stages.at(-1)!;
    expect(runtime).toMatch(/npm ci --omit=dev/);
    // The runtime stage holds the unpacked `npm pack` output and runs the compiled CLI: no tsx, no src/.
    expect(runtime).toMatch(/COPY --from=build \/pkg\/quotafed/);
    expect(stages.at(-2)).toMatch(/npm pack/);
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    expect(pkg.dependencies).not.toHaveProperty('tsx');
    expect(pkg.devDependencies).toHaveProperty('tsx');
    expect(runtime).toMatch(/ENTRYPOINT \["node", "dist\/cli\/main\.js"\]/);
    expect(runtime).not.toMatch(/tsx|src\//);
  });

  it('runs as a non-root user', () => {
    const users = [...stages.at(-1)!.matchAll(/^USER (\S+)/gm)].map((match) => match[1]);
    expect(users.at(-1)).toBeDefined();
    expect(['root', '0']).not.toContain(users.at(-1));
  });

  it('copies only paths that exist and are not excluded by .dockerignore', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .filter((line) => line && !line.startsWith('#'));
    for (const match of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const source of match[1]!.split(' ')) {
        expect(existsSync(join(root, source)), source).toBe(true);
        expect(ignored).not.toContain(source);
      }
    }
  });
});

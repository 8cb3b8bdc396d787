// Redis connections with an ACL user and TLS (rediss://), as the region's engine makes them.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';
import { createRegionRedis, waitReady } from '../../src/store/client.ts';
import { freePort } from '../../src/ops/redis-process.ts';
import { useRedis } from '../harness/redis.ts';

const certs = mkdtempSync(join(tmpdir(), 'quotafed-tls-'));
afterAll(() => rmSync(certs, { recursive: true, force: true }));
const file = (name: string) => join(certs, name);
const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
openssl(
  'req',
  '-x509',
  '-newkey',
  'rsa:2048',
  '-nodes',
  '-days',
  '1',
  '-subj',
  '/CN=quotafed-test-ca',
  '-keyout',
  file('ca.key'),
  '-out',
  file('ca.crt'),
);
openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', file('redis.key'), '-out', file('redis.csr'));
openssl(
  'x509',
  '-req',
  '-in',
  file('redis.csr'),
  '-CA',
  file('ca.crt'),
  '-CAkey',
  file('ca.key'),
  '-CAcreateserial',
  '-days',
  '1',
  '-out',
  file('redis.crt'),
);

const tlsPort = await freePort();
const server = await useRedis({
  extraArgs: [
    '--tls-port',
    String(tlsPort),
    '--tls-cert-file',
    file('redis.crt'),
    '--tls-key-file',
    file('redis.key'),
    '--tls-ca-cert-file',
    file('ca.crt'),
    '--tls-auth-clients',
    'no',
    '--user',
    'default',
    'off',
    '--user',
    'quotafed',
    'on',
    '>s3cret-pass',
    '~*',
    '&*',
    '+@all',
  ],
});

const rules = [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 2, period: '1m' }] as const;

describe('Redis AUTH (ACL user) and TLS', () => {
  it('decides over rediss:// with an ACL user and the CA from config', async () => {
    const config = parseConfig({
      region: 'us-east',
      redis: { url: `rediss://quotafed:s3cret-pass@localhost:${tlsPort}`, tls: { caFile: file('ca.crt') }, commandTimeoutMs: 2000 },
      rules,
    });
    const redis = createRegionRedis(config);
    await waitReady(redis);
    const engine = createRedisEngine({ config, redis });
    const outcomes = [];
    for (let i = 0; i < 3; i++) outcomes.push((await engine.decide({ apiKey: 'k', ip: '', method: 'GET', path: '/' })).allowed);
    expect(outcomes).toEqual([true, true, false]);
    redis.disconnect();
  });

  it('refuses a wrong password and an untrusted certificate', async () => {
    const wrongPassword = createRegionRedis(
      parseConfig({ region: 'us-east', redis: { url: `redis://quotafed:nope@127.0.0.1:${server.port}`, connectTimeoutMs: 1000 }, rules }),
      { retryStrategy: () => null },
    );
    const denied = await new Promise<Error>((resolve) => wrongPassword.once('error', resolve));
    expect(denied.message).toMatch(/WRONGPASS|invalid username-password/i);
    wrongPassword.disconnect();

    const untrusted = createRegionRedis(
      parseConfig({
        region: 'us-east',
        redis: { url: `rediss://quotafed:s3cret-pass@localhost:${tlsPort}`, connectTimeoutMs: 1000 },
        rules,
      }),
      { retryStrategy: () => null },
    );
    const tlsError = await new Promise<Error>((resolve) => untrusted.once('error', resolve));
    expect(tlsError.message).toMatch(/certificate/i);
    untrusted.disconnect();
  });
});

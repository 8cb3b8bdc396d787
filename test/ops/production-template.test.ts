// The documented production template must stay a valid config: operators copy it.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfigFile } from '../../src/config/load.ts';

const template = new URL('../../regions/production.template.yaml', import.meta.url).pathname;

describe('regions/production.template.yaml', () => {
  it('is a valid config as shipped', () => {
    const config = loadConfigFile(template, {});
    expect(config.region).toBe('us-east');
    expect(config.redis.url).toMatch(/^rediss:\/\/quotafed@/);
    expect(config.redis.tls?.caFile).toBe('/etc/quotafed/tls/redis-ca.pem');
    expect(config.redis.tls?.rejectUnauthorized).toBe(true);
    expect(config.federation.peers.map((peer) => peer.name)).toEqual(['eu-west', 'ap-south']);
    expect(config.federation.peers.every((peer) => peer.redisUrl.startsWith('rediss://'))).toBe(true);
    expect(config.federation.syncIntervalMs).toBe(100);
    expect(config.federation.leakageBudget).toBe('5%');
    expect(config.rules.find((rule) => rule.name === 'checkout')?.failMode).toBe('closed');
    expect(config.rules.find((rule) => rule.name === 'search')?.shadow).toBe(true);
    // Secrets are not in the file.
    expect(config.admin.token).toBeUndefined();
    expect(config.federation.secret).toBeUndefined();
  });

  it('takes its secrets and Redis password from the documented environment variables', () => {
    const config = loadConfigFile(template, {
      QUOTAFED_REDIS_URL: 'rediss://quotafed:s3cret-password@redis.us-east.internal:6380',
      QUOTAFED_ADMIN_TOKEN: 'admin-token-0123456789',
      QUOTAFED_FEDERATION_SECRET: 'federation-secret-0123456789',
    });
    expect(config.redis.url).toBe('rediss://quotafed:s3cret-password@redis.us-east.internal:6380');
    expect(config.admin.token).toBe('admin-token-0123456789');
    expect(config.federation.secret).toBe('federation-secret-0123456789');
  });

  it('still rejects a too-short secret from the environment, naming the field', () => {
    expect(() => loadConfigFile(template, { QUOTAFED_FEDERATION_SECRET: 'short' })).toThrow(ConfigError);
    try {
      loadConfigFile(template, { QUOTAFED_FEDERATION_SECRET: 'short' });
    } catch (error) {
      expect((error as ConfigError).fields).toContain('federation.secret');
    }
  });
});

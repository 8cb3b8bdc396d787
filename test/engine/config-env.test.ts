import { describe, expect, it } from 'vitest';
import { loadConfigFile, peerEnvName } from '../../src/config/load.ts';

describe('environment overrides', () => {
  it('override deployment settings and each peer’s Redis URL', () => {
    const config = loadConfigFile('regions/us-east.yaml', {
      QUOTAFED_PORT: '9001',
      QUOTAFED_REDIS_URL: 'redis://10.1.0.1:6379',
      [peerEnvName('eu-west')]: 'rediss://gossip:pw@eu.example:6380',
    });
    expect(config.port).toBe(9001);
    expect(config.redis.url).toBe('redis://10.1.0.1:6379');
    expect(config.federation.peers.find((p) => p.name === 'eu-west')?.redisUrl).toBe('rediss://gossip:pw@eu.example:6380');
    expect(config.federation.peers.find((p) => p.name === 'ap-south')?.redisUrl).toBe('redis://127.0.0.1:6383');
    expect(peerEnvName('ap-south')).toBe('QUOTAFED_PEER_AP_SOUTH_REDIS_URL');
  });

  it('names the field when an override is invalid', () => {
    expect(() => loadConfigFile('regions/us-east.yaml', { [peerEnvName('eu-west')]: 'http://nope' })).toThrow(
      /federation\.peers\[\d\]\.redisUrl/,
    );
  });
});

// The launcher's view of regions/*.yaml, and the rewritten copies it makes when the ports move.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.ts';
import { localRegions } from '../../src/ops/local-regions.ts';

const dir = new URL('../../regions/', import.meta.url).pathname;

describe('local regions', () => {
  it('reads the three demo regions in port order and uses the files as they are', () => {
    const regions = localRegions(dir);
    expect(regions.map((region) => [region.name, region.servicePort, region.redisPort, region.upstreamPort])).toEqual([
      ['us-east', 8081, 6381, 8090],
      ['eu-west', 8082, 6382, 8090],
      ['ap-south', 8083, 6383, 8090],
    ]);
    expect(regions.map((region) => region.configPath)).toEqual(['us-east', 'eu-west', 'ap-south'].map((name) => `${dir}${name}.yaml`));
  });

  it('moves every port consistently when asked, leaving the originals alone', () => {
    const original = readFileSync(`${dir}us-east.yaml`, 'utf8');
    const regions = localRegions(dir, { redisPorts: [7381, 7382, 7383], servicePorts: [9081, 9082, 9083], upstreamPort: 9090 });
    expect(readFileSync(`${dir}us-east.yaml`, 'utf8')).toBe(original);
    const redisOf = Object.fromEntries(regions.map((region) => [region.name, region.redisPort]));
    expect(redisOf).toEqual({ 'us-east': 7381, 'eu-west': 7382, 'ap-south': 7383 });
    for (const region of regions) {
      expect(region.configPath).not.toContain(dir);
      // The copy is a valid config in its own right, with everything pointing at the new ports.
      const config = loadConfigFile(region.configPath, {});
      expect(config.port).toBe(region.servicePort);
      expect(config.redis.url).toBe(`redis://127.0.0.1:${region.redisPort}`);
      expect(config.upstream.url).toBe('http://127.0.0.1:9090');
      for (const peer of config.federation.peers) expect(peer.redisUrl).toBe(`redis://127.0.0.1:${redisOf[peer.name]}`);
      // Rules are untouched.
      expect(config.rules).toEqual(localRegions(dir)[0]!.config.rules);
    }
  });

  it('rejects a port list of the wrong length', () => {
    expect(() => localRegions(dir, { redisPorts: [7381, 7382] })).toThrow(/--redis-ports needs 3 ports/);
  });
});

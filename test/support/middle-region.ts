// Region b of a federation of a, b and c, for tests that run the scripts on one real redis-server: the peers'
// Redis URLs are never dialled.
import { parseConfig } from '../../src/config/load.ts';
import type { Config, ConfigInput } from '../../src/config/schema.ts';

/**
 * Region b's config (peers a and c, budget 5%) with `rules`.
 *
 * @example
 * const config = middleRegion([{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 300, period: 60_000 }]);
 */
export function middleRegion(rules: ConfigInput['rules']): Config {
  return parseConfig({
    region: 'b',
    federation: {
      leakageBudget: '5%',
      peers: [
        { name: 'a', redisUrl: 'redis://127.0.0.1:1' },
        { name: 'c', redisUrl: 'redis://127.0.0.1:1' },
      ],
    },
    rules,
  });
}

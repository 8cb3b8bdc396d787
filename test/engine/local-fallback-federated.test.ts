// While the breaker is open, a federated region's local fallback spends only its own share of limit + budget.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { createResilientEngine } from '../../src/engine/resilient.ts';
import { StoreUnavailableError } from '../../src/engine/errors.ts';
import type { DecisionEngine } from '../../src/engine/types.ts';
import { silentLogger } from '../../src/log.ts';

// An inner engine whose store is down (this test is about what happens without Redis).
const deadStore: DecisionEngine = {
  decide: () => Promise.reject(new StoreUnavailableError('Redis down')),
  release: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

describe('local fallback in a federation', () => {
  it('admits the region’s weight share of limit + budget per window, not the whole limit', async () => {
    const config = parseConfig({
      region: 'us-east',
      breaker: { failureThreshold: 1, probeIntervalMs: 60_000, localFallback: true },
      federation: { leakageBudget: 15, peers: [{ name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' }, { name: 'ap-south', redisUrl: 'redis://127.0.0.1:2' }] },
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 300, period: '1h', failMode: 'closed' }],
    });
    const engine = createResilientEngine({ config, inner: deadStore, probe: () => Promise.reject(new Error('down')), logger: silentLogger() });
    try {
      await engine.decide({ apiKey: 'k', ip: '', method: 'GET', path: '/' }); // opens the breaker (fail-closed)
      expect(engine.breaker.state).toBe('open');
      let admitted = 0;
      for (let i = 0; i < 400; i++) if ((await engine.decide({ apiKey: 'k', ip: '', method: 'GET', path: '/' })).allowed) admitted++;
      expect(admitted).toBe(Math.floor((300 + 15) / 3));
    } finally {
      await engine.close();
    }
  });
});

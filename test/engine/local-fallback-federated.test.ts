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
  it('admits the region’s share of limit + budget per window (protocol.ts portion), not the whole limit; no fail-closed rule', async () => {
    const config = parseConfig({
      region: 'us-east',
      breaker: { failureThreshold: 1, probeIntervalMs: 60_000, localFallback: true, localFallbackStart: 'atOnce' },
      federation: {
        leakageBudget: 15,
        peers: [
          { name: 'eu-west', redisUrl: 'redis://127.0.0.1:1' },
          { name: 'ap-south', redisUrl: 'redis://127.0.0.1:2' },
        ],
      },
      rules: [
        {
          name: 'fw',
          match: { endpoints: ['/open'] },
          by: ['apiKey'],
          algorithm: 'fixedWindow',
          limit: 300,
          period: '1h',
          failMode: 'open',
        },
        {
          name: 'closed',
          match: { endpoints: ['/closed'] },
          by: ['apiKey'],
          algorithm: 'fixedWindow',
          limit: 300,
          period: '1h',
          failMode: 'closed',
        },
      ],
    });
    const engine = createResilientEngine({
      config,
      inner: deadStore,
      probe: () => Promise.reject(new Error('down')),
      logger: silentLogger(),
    });
    try {
      // The failure that opens the breaker is already decided (and counted) by the local fallback.
      const first = await engine.decide({ apiKey: 'k', ip: '', method: 'GET', path: '/open' });
      expect(first.outcomes[0]!.source).toBe('local-fallback');
      expect(engine.breaker.state).toBe('open');
      let admitted = first.allowed ? 1 : 0;
      for (let i = 0; i < 400; i++) if ((await engine.decide({ apiKey: 'k', ip: '', method: 'GET', path: '/open' })).allowed) admitted++;
      // Three equal weights: share units 333333 each; floor(300·u/S) + floor(15·u/S) = 99 + 4.
      expect(admitted).toBe(Math.floor((300 * 333_333) / 1_000_000) + Math.floor((15 * 333_333) / 1_000_000));
      let closedAdmitted = 0;
      for (let i = 0; i < 50; i++)
        if ((await engine.decide({ apiKey: 'k', ip: '', method: 'GET', path: '/closed' })).allowed) closedAdmitted++;
      expect(closedAdmitted).toBe(0);
    } finally {
      await engine.close();
    }
  });
});

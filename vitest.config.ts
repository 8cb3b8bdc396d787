import { defineConfig } from 'vitest/config';
import { ProjectDurations } from './test/support/project-durations.ts';

/**
 * The slow project: real processes over long stretches (chaos lab, soak, bench harness, the browser, the
 * launcher, Redis Cluster, compose, Toxiproxy, the heavy hardening runs). Everything else under test/ is the
 * fast project (unit, protocol, engine, HTTP, service): `npm run test:fast`. `npm test` runs both, fast first.
 */
const SLOW = [
  'test/chaos/**/*.test.ts',
  'test/bench/**/*.test.ts',
  'test/toxiproxy/**/*.test.ts',
  'test/dashboard/browser.test.ts',
  'test/ops/launch.test.ts',
  'test/ops/compose.test.ts',
  'test/ops/engine-cluster.test.ts',
  'test/ops/redis-cluster.test.ts',
  'test/hardening/soak-short.test.ts',
  'test/hardening/service-kill.test.ts',
  'test/hardening/redis-aof-restart.test.ts',
  'test/hardening/slow-redis.test.ts',
  'test/service/fifty-gateways.test.ts',
  'test/nginx/**/*.test.ts',
  'test/federation/blackbox-sequential.test.ts',
  'test/federation/bootstrap.test.ts',
  'test/federation/correlated-loss.test.ts',
];

/**
 * The Lua-against-protocol.ts property test runs in both: 30 generated schedules per algorithm in the fast project
 * (a quick cross-check on every change), the full 120 in the slow one (about two minutes on two busy cores).
 */
const DIFFERENTIAL = 'test/federation/differential.test.ts';

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    // Every test file starts its own redis-server processes on free ports; two cores, so two files at a time.
    maxWorkers: 2,
    // The JSON report lets .ci/run print a plain 'N passed, N failed' closing line; ProjectDurations prints
    // (and writes to reports/projects.json) each project's wall-clock time.
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }], new ProjectDurations('reports/projects.json')],
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: SLOW,
          env: { DIFFERENTIAL_RUNS: '30' },
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: 'slow', include: [...SLOW, DIFFERENTIAL], env: { DIFFERENTIAL_RUNS: '120' }, sequence: { groupOrder: 1 } },
      },
    ],
  },
});

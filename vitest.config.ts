import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    // Every test file starts its own redis-server processes on free ports; two cores, so two files at a time.
    maxWorkers: 2,
    reporters: ['default'],
  },
});

// quotafed as a library registers no process metrics on import (an app embedding it keeps its own); the regional
// service registers them once. Vitest gives each test file a fresh module graph, so this import is the first.
import { describe, expect, it } from 'vitest';
import { registerDefaultMetrics, registry } from '../../src/index.ts';

const names = async () => (await registry.getMetricsAsJSON()).map((metric) => metric.name);

describe('Prometheus default metrics', () => {
  it('are not registered by importing the package, and are registered once by the service', async () => {
    expect(await names()).toContain('quotafed_decisions_total');
    expect((await names()).filter((name) => /^quotafed_(process|nodejs)_/.test(name))).toEqual([]);

    registerDefaultMetrics();
    registerDefaultMetrics(); // a second service in the same process: no "already registered" error
    expect(await names()).toContain('quotafed_process_cpu_seconds_total');
    expect(await names()).toContain('quotafed_nodejs_heap_size_used_bytes');
  });
});

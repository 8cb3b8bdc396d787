// The breaker samples calls with cockatiel's SamplingBreaker and reads its serialisable `state` (the window's
// failure and success counts) to apply its own "at least failureThreshold failures" rule; BullMQ's worker is
// extended at its protected job hooks. Both packages are pinned to exact versions in package.json; this test
// fails when an upgrade changes either the version or the shape the code relies on.
import { readFileSync } from 'node:fs';
import { CircuitState, SamplingBreaker } from 'cockatiel';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  dependencies: Record<string, string>;
};
const installed = (name: string): string =>
  (JSON.parse(readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), 'utf8')) as { version: string }).version;

describe('pinned dependencies the code extends', () => {
  it('cockatiel and bullmq are pinned exactly, and the installed versions are the pinned ones', () => {
    expect(pkg.dependencies.cockatiel).toMatch(/^\d+\.\d+\.\d+$/);
    expect(pkg.dependencies.bullmq).toMatch(/^\d+\.\d+\.\d+$/);
    expect(installed('cockatiel')).toBe(pkg.dependencies.cockatiel);
    expect(installed('bullmq')).toBe(pkg.dependencies.bullmq);
  });

  it("SamplingBreaker's state counts the window's failures and successes", () => {
    const sampler = new SamplingBreaker({ threshold: 0.5, duration: 10_000, minimumRps: 0.1 });
    sampler.success(CircuitState.Closed);
    sampler.success(CircuitState.Closed);
    sampler.failure(CircuitState.Closed);
    const state = sampler.state as { currentFailures: number; currentSuccesses: number };
    expect(state.currentFailures).toBe(1);
    expect(state.currentSuccesses).toBe(2);
  });
});

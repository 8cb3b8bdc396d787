// docs/envoy.md's Envoy bootstrap and region config agree: the rate limit filter waits longer than quotafed's
// decision deadline (2 x redis.commandTimeoutMs + 25 ms, plus the largest maxWaitMs), so a slow Redis is decided by
// each rule's failMode and Envoy's failure_mode_deny only covers quotafed itself not answering.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.ts';
import { RedisSettings } from '../../src/config/schema.ts';

const doc = readFileSync(new URL('../../docs/envoy.md', import.meta.url), 'utf8');
const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);

/** Envoy's duration form ("0.25s", "1.25s") in milliseconds. */
const millis = (duration: string) => Number(/^(\d+(?:\.\d+)?)s$/.exec(duration)![1]) * 1000;

describe('docs/envoy.md timeouts', () => {
  const region = parseConfig(parseYaml(blocks.find((b) => b.startsWith('region:'))!), 'docs/envoy.md region config');
  const bootstrap = parseYaml(blocks.find((b) => b.startsWith('static_resources:'))!) as {
    static_resources: {
      listeners: Array<{
        filter_chains: Array<{
          filters: Array<{ typed_config: { http_filters: Array<{ name: string; typed_config: { timeout: string } }> } }>;
        }>;
      }>;
    };
  };
  const filter = bootstrap.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config.http_filters.find(
    (f) => f.name === 'envoy.filters.http.ratelimit',
  )!;

  it('keeps the default command timeout (not the old 50 ms)', () => {
    expect(region.redis.commandTimeoutMs).toBe(RedisSettings.parse({}).commandTimeoutMs);
    expect(doc).not.toMatch(/commandTimeoutMs: 50\b/);
  });

  it('gives the filter a timeout above the engine deadline', () => {
    const deadline = 2 * region.redis.commandTimeoutMs + 25 + Math.max(0, ...region.rules.map((r) => r.maxWaitMs));
    expect(millis(filter.typed_config.timeout)).toBeGreaterThan(deadline);
  });
});

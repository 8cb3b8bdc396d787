// Chaos annotations: merge rules (set, keep, clear) and expiry, so a dead chaos run leaves no stale shade.
import { describe, expect, it } from 'vitest';
import { AnnotationInput, createAnnotationStore } from '../../src/dashboard/annotations.ts';

describe('annotation store', () => {
  it('keeps fields that a later POST omits, clears fields set to null, and stamps a missing since', () => {
    let now = 1_000_000;
    const store = createAnnotationStore({ now: () => now });
    store.apply(AnnotationInput.parse({ scenario: 'partition', partition: { region: 'eu-west' } }));
    expect(store.current()?.partition).toMatchObject({ region: 'eu-west', since: 1_000_000 });

    now += 2_000;
    // A leakage reading alone keeps the partition, including its original start.
    store.apply(AnnotationInput.parse({ leakage: { leakage: 3, budget: 15 } }));
    expect(store.current()).toMatchObject({ scenario: 'partition', partition: { since: 1_000_000 }, leakage: { leakage: 3 } });

    store.apply(AnnotationInput.parse({ partition: null }));
    expect(store.current()?.partition).toBeNull();
    expect(store.current()?.leakage?.leakage).toBe(3);
  });

  it('expires after the TTL unless refreshed', () => {
    let now = 0;
    const store = createAnnotationStore({ now: () => now, defaultTtlMs: 10_000 });
    store.apply(AnnotationInput.parse({ scenario: 'flapping', ttlMs: 5_000 }));
    now = 4_999;
    expect(store.current()?.scenario).toBe('flapping');
    store.apply(AnnotationInput.parse({}));
    now = 9_998;
    expect(store.current()?.scenario).toBe('flapping');
    now = 14_999;
    expect(store.current()).toBeNull();
  });

  it('rejects malformed input', () => {
    expect(AnnotationInput.safeParse({ partition: {} }).success).toBe(false);
    expect(AnnotationInput.safeParse({ partition: { region: 'EU West' } }).success).toBe(false);
    expect(AnnotationInput.safeParse({ partition: { region: 'eu-west', since: 10, until: 5 } }).success).toBe(false);
    expect(AnnotationInput.safeParse({ leakage: { leakage: -1, budget: 3 } }).success).toBe(false);
    expect(AnnotationInput.safeParse({ ttlMs: 10 }).success).toBe(false);
    expect(AnnotationInput.safeParse({ extra: true }).success).toBe(false);
    expect(AnnotationInput.safeParse({ leakage: { leakage: 4, budget: null } }).success).toBe(true);
  });
});

// Reading a rule's state key in tests whatever its layout: a hash (windows, logs, a federated bucket), a single
// region's token bucket, one number (lua/includes/gcra.lua: the µs at which it is full again), or a silent
// federated bucket's string (lua/includes/silent_string.lua: read as the hash it stands for).
import type { Cluster, Redis } from 'ioredis';
import { expect } from 'vitest';
import { singleBucketTokens, type SingleBucketRule } from '../../src/protocol/index.ts';
import { silentStringFields } from '../../src/store/silent-string.ts';
import type { RequestContext } from '../../src/engine/types.ts';

/** The key's fields as a hash (a silent string's too); a single region's bucket as `{ fullAtUs }`; `{}` when absent. */
export async function stateFields(redis: Redis | Cluster, key: string): Promise<Record<string, string>> {
  if ((await redis.type(key)) !== 'string') return redis.hgetall(key);
  const held = (await redis.getBuffer(key))!;
  return silentStringFields(held) ?? { fullAtUs: held.toString('utf8') };
}

/** A token bucket's tokens at `now` (ms), in either layout; the capacity when the key is absent. */
export async function bucketTokens(redis: Redis | Cluster, key: string, rule: SingleBucketRule, now: number): Promise<number> {
  if ((await redis.type(key)) === 'hash') return Number(await redis.hget(key, 'tokens'));
  const held = await redis.getBuffer(key);
  const silent = held === null ? undefined : silentStringFields(held);
  if (silent) return Number(silent.tokens);
  return singleBucketTokens(rule, held === null ? undefined : Number(held.toString('utf8')), now);
}

/** Two keys of one rule decided side by side: one new (its silent string), one already a silent hash (z alone). */
export interface SilentPair {
  asString: string;
  asHash: string;
  stringKey: string;
  hashKey: string;
}

/**
 * Decides `cost` for both keys of `pair` and expects the same answer, the first key still a string, and that
 * string standing for exactly the second key's hash (lua/includes/silent_string.lua).
 */
export async function expectStringAsHash(
  redis: Redis | Cluster,
  decide: (apiKey: string, cost: number) => Promise<unknown>,
  pair: SilentPair,
  cost: number,
): Promise<void> {
  const [a, b] = [await decide(pair.asString, cost), await decide(pair.asHash, cost)];
  expect(a).toEqual(b);
  expect(await redis.type(pair.stringKey)).toBe('string');
  expect(await stateFields(redis, pair.stringKey)).toEqual(await redis.hgetall(pair.hashKey));
}

/** One step of a side-by-side run: the clock, then the cost decided on both keys. */
export type Step = readonly [at: number, cost: number];

/**
 * expectStringAsHash at each step, the clock set to the step's time first (`setNow`); `after` runs after each step
 * (a check of the string key).
 */
export async function expectStepsAsHash(
  redis: Redis | Cluster,
  decide: (apiKey: string, cost: number) => Promise<unknown>,
  pair: SilentPair,
  steps: readonly Step[],
  setNow: (at: number) => void,
  after?: () => Promise<void>,
): Promise<void> {
  for (const [at, cost] of steps) {
    setNow(at);
    await expectStringAsHash(redis, decide, pair, cost);
    await after?.();
  }
}

/** The fields of a silent key's string in their order (lua/includes/silent_string.lua), for region `r`. */
function stringFieldNames(kind: 'bucket' | 'window', r: number): string[] {
  return kind === 'bucket'
    ? ['tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2', ...[0, 1, 2].flatMap((k) => [`c${k}.${r}`, `t${k}.${r}`])]
    : ['w0', 'w1', 'w2', ...[0, 1, 2].flatMap((k) => [`c${k}.${r}`, `t${k}.${r}`, `a${k}.${r}.${r}`])];
}

/**
 * An upgraded region meets the previous release's text string (state layout 3, `S<r>|tokens|...` or `W<r>|w0|...`):
 * the fields a first admission of a fresh key left, written as that text on one fresh key and as its hash on another,
 * decide alike 700 ms later and in the next period (expectStepsAsHash), and the string is packed (state layout 4:
 * first byte 0x9d for a bucket, 0x9e for a window) from its first write on. `engineAt` decides at the clock it is given.
 */
export async function expectLayout3Upgrade(
  redis: Redis | Cluster,
  options: {
    kind: 'bucket' | 'window';
    /** This region's index. */
    r: number;
    engineAt: (now: () => number) => { decide(request: RequestContext): Promise<{ allowed: boolean }>; close(): Promise<void> };
    request: (apiKey: string, cost: number) => RequestContext;
    freshKey: () => string;
    stateKeyOf: (apiKey: string) => string;
    /** The first admission's time and the rule's period (ms). */
    start: number;
    period: number;
  },
): Promise<void> {
  const { kind, r, freshKey, stateKeyOf, start, period } = options;
  let now = start;
  const engine = options.engineAt(() => now);
  const decide = (apiKey: string, cost: number) => engine.decide(options.request(apiKey, cost));
  const first = freshKey();
  expect((await decide(first, 3)).allowed).toBe(true);
  const fields = await stateFields(redis, stateKeyOf(first));
  const text = stringFieldNames(kind, r).map((name) => fields[name] ?? '');
  const [asString, asHash] = [freshKey(), freshKey()];
  const [stringKey, hashKey] = [stateKeyOf(asString), stateKeyOf(asHash)];
  await redis.set(stringKey, `${kind === 'bucket' ? 'S' : 'W'}${r}|${text.join('|')}`, 'PX', 600_000);
  await redis.hset(hashKey, fields);
  expect(await stateFields(redis, stringKey)).toEqual(await redis.hgetall(hashKey));
  const steps = [
    [start + 700, 5],
    [start + period + 250, 2],
  ] as const;
  const setNow = (at: number) => {
    now = at;
  };
  await expectStepsAsHash(redis, decide, { asString, asHash, stringKey, hashKey }, steps, setNow, async () => {
    expect((await redis.getBuffer(stringKey))![0]).toBe(kind === 'bucket' ? 0x9d : 0x9e);
  });
  await engine.close();
}

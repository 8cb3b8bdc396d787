// The micro-batcher and the single-region script change how decisions travel, never what they decide: against a real
// redis-server, decisions submitted together (one FCALL decides them in order) answer exactly what the same
// decisions answer made one by one, and leave the same state; the single-region library answers exactly
// what decide.lua answers. Property-based (fast-check) over rule shapes, callers, costs and clock steps.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { createDecideBatcher } from '../../src/engine/decide-batcher.ts';
import { createRedisEngine, createTunedRedisEngine } from '../../src/engine/redis-engine.ts';
import { withScripts } from '../../src/store/commands.ts';
import { decideCaller, type DecideCaller } from '../../src/store/decide-caller.ts';
import type { Decision, RequestContext } from '../../src/engine/types.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const admin = client(server.url);
const engineRedis = client(server.url);

// Every rule keys by the API key (one principal, one shard per request): Redis decides a request atomically.
const RULES: ConfigInput['rules'] = [
  { name: 'tb', by: ['apiKey'], algorithm: 'tokenBucket', limit: 5, period: '10s', burst: 4 },
  { name: 'fw', by: ['apiKey', 'method'], algorithm: 'fixedWindow', limit: 6, period: '5s' },
  { name: 'sw', by: ['apiKey'], algorithm: 'slidingWindow', limit: 7, period: '4s' },
  { name: 'sl', by: ['apiKey'], algorithm: 'slidingLog', limit: 5, period: '3s' },
  { name: 'cc', by: ['apiKey'], algorithm: 'concurrency', limit: 3, period: '1m', leaseTtl: '2s' },
  { name: 'shadow-fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 2, period: '1m', shadow: true },
];

interface Step {
  key: string;
  method: 'GET' | 'POST';
  cost: number;
  /** Milliseconds since the previous request (0: same instant). */
  dt: number;
}

const step = fc.record({
  key: fc.constantFrom('a', 'b', 'c'),
  method: fc.constantFrom('GET' as const, 'POST' as const),
  cost: fc.integer({ min: 1, max: 3 }),
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 2500 })),
});
const scenario = fc.record({
  rules: fc.subarray(RULES, { minLength: 1 }),
  steps: fc.array(step, { minLength: 1, maxLength: 60 }),
  start: fc.integer({ min: 1_800_000_000_000, max: 1_800_000_100_000 }),
});

/** What a decision says, without the random lease ids. */
function comparable(decision: Decision) {
  return { allowed: decision.allowed, outcomes: decision.outcomes, leases: decision.leases.map(({ key, slots }) => ({ key, slots })) };
}

/** Every key's value (hash fields, sorted-set scores; lease ids are random), without TTLs (wall clock). */
async function dump(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of (await admin.keys('*')).sort()) {
    const type = await admin.type(key);
    if (type === 'hash') out[key] = await admin.hgetall(key);
    else if (type === 'zset') out[key] = (await admin.zrange(key, '0', '-1', 'WITHSCORES')).filter((_, i) => i % 2 === 1);
    else out[key] = type;
  }
  return out;
}

type Variant = { singleRegion: boolean; batch: boolean };

async function run(input: { rules: ConfigInput['rules']; steps: Step[]; start: number }, variant: Variant) {
  await admin.flushall();
  const config = parseConfig({ region: 'us-east', rules: input.rules });
  let now = input.start;
  const engine = createTunedRedisEngine({
    config,
    redis: engineRedis,
    overLimitCache: false,
    nowMs: () => now,
    singleRegionScript: variant.singleRegion,
    batch: variant.batch,
  });
  const requests: RequestContext[] = input.steps.map((s) => ({
    apiKey: s.key,
    ip: '10.0.0.1',
    method: s.method,
    path: '/x',
    cost: s.cost,
  }));
  let decisions: Decision[];
  if (variant.batch) {
    // All submitted before any answer, in one turn: they go as batches (of at most maxBatch).
    decisions = await Promise.all(
      requests.map((request, i) => {
        now += input.steps[i]!.dt;
        return engine.decide(request);
      }),
    );
  } else {
    decisions = [];
    for (let i = 0; i < requests.length; i++) {
      now += input.steps[i]!.dt;
      decisions.push(await engine.decide(requests[i]!));
    }
  }
  await engine.close();
  return { decisions: decisions.map(comparable), state: await dump() };
}

/** A single-region decide call (decideCall's array) of one fixed window of 5 a minute on `key`, cost 1. */
const fixedWindowCall = (key: string) => [2, 'qf:{s1}:m', key, 0, 1, '1000000', 1000, 1, '', 'fw', 5, 60_000, 5, 1, -1, 30_000, '', 0];

/**
 * The real caller with each call it makes recorded: its size (1 for a call sent alone) and how many are in flight.
 */
function recording(caller: DecideCaller): { counted: DecideCaller; sizes: number[]; calls: { inFlight: number; mostInFlight: number } } {
  const sizes: number[] = [];
  const calls = { inFlight: 0, mostInFlight: 0 };
  const track = async <T>(size: number, call: () => Promise<T>): Promise<T> => {
    sizes.push(size);
    calls.mostInFlight = Math.max(calls.mostInFlight, ++calls.inFlight);
    try {
      return await call();
    } finally {
      calls.inFlight--;
    }
  };
  const counted: DecideCaller = Object.assign((one: readonly (string | number)[]) => track(1, () => caller(one)), {
    batch: (batch: readonly (readonly (string | number)[])[]) => track(batch.length, () => caller.batch(batch)),
  });
  return { counted, sizes, calls };
}

/** Each variant decides exactly what decide.lua decides one call at a time: the same answers, the same state. */
async function matchesReference(input: Parameters<typeof run>[0], variants: Parameters<typeof run>[1][]): Promise<void> {
  const reference = await run(input, { singleRegion: false, batch: false });
  for (const variant of variants) {
    const result = await run(input, variant);
    expect(result.decisions, JSON.stringify(variant)).toEqual(reference.decisions);
    expect(result.state, JSON.stringify(variant)).toEqual(reference.state);
  }
}

describe('batched and single-region decisions', () => {
  it('a batch decides exactly what the same decisions decide one by one, and the single-region script what decide.lua does', async () => {
    let batched = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async (input) => {
        await matchesReference(input, [
          { singleRegion: false, batch: true },
          { singleRegion: true, batch: false },
          { singleRegion: true, batch: true },
        ]);
        if (input.steps.length > 2) batched++;
      }),
      { numRuns: 40 },
    );
    expect(batched).toBeGreaterThan(10);
  }, 120_000);

  it("the lean script's one-rule path (a fixed or sliding window or a token bucket alone) decides exactly what decide.lua does", async () => {
    const oneRule = fc.record({
      rules: fc.constantFrom(
        ...RULES.filter((rule) => ['fixedWindow', 'slidingWindow', 'tokenBucket'].includes(rule.algorithm ?? '')).map((rule) => [rule]),
      ),
      steps: fc.array(step, { minLength: 1, maxLength: 60 }),
      start: fc.integer({ min: 1_800_000_000_000, max: 1_800_000_100_000 }),
    });
    await fc.assert(
      fc.asyncProperty(oneRule, async (input) => {
        await matchesReference(input, [
          { singleRegion: true, batch: false },
          { singleRegion: true, batch: true },
        ]);
      }),
      { numRuns: 30 },
    );
  }, 120_000);

  it('sends concurrent decisions in one round trip: one call, or two sent together when they are many', async () => {
    await admin.flushall();
    const config = parseConfig({
      region: 'us-east',
      rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000, period: '1m' }],
    });
    await admin.config('RESETSTAT');
    const engine = createRedisEngine({ config, redis: engineRedis, overLimitCache: false });
    await engine.decide({ apiKey: 'warm', ip: '10.0.0.1', method: 'GET', path: '/' });
    await admin.config('RESETSTAT');
    const decisions = await Promise.all(
      Array.from({ length: 50 }, (_, i) => engine.decide({ apiKey: `k${i % 7}`, ip: '10.0.0.1', method: 'GET', path: '/' })),
    );
    expect(decisions.every((d) => d.allowed)).toBe(true);
    const stats = await admin.info('commandstats');
    const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    // All 50 arrived in one turn of the event loop: they go together, as two calls of 25 sent back to back (Redis
    // decides the second while the engine answers the first).
    expect(calls('fcall')).toBe(2);
    expect(
      decisions
        .map((d) => d.binding!.remaining)
        .sort((a, b) => a - b)
        .slice(0, 3),
    ).toEqual([992, 993, 993]);
    await engine.close();
  });

  it('sends what arrives while a call is in flight together after it, and a lone decision alone', async () => {
    await admin.flushall();
    const redis = withScripts(engineRedis);
    const caller = decideCaller(redis, { script: 'decideSingleRegion' });
    const { counted, sizes } = recording(caller);
    const batcher = createDecideBatcher(counted);
    await batcher.submit(fixedWindowCall('qf:{s1}:lone'), 0);
    // Three in this turn; two more once the first call is in flight (after the turn ends, before its answer).
    const first = [0, 1, 2].map((i) => batcher.submit(fixedWindowCall(`qf:{s1}:a${i}`), 0));
    await new Promise((resolve) => setImmediate(resolve));
    const second = [0, 1].map((i) => batcher.submit(fixedWindowCall(`qf:{s1}:b${i}`), 0));
    const replies = (await Promise.all([...first, ...second])) as unknown[][];
    expect(replies.map((reply) => reply[0])).toEqual([1, 1, 1, 1, 1]);
    // A lone decision went alone; then a call of the three, then one of the two that waited for it.
    expect(sizes).toEqual([1, 3, 2]);
  });

  it('keeps two calls in flight: an idle queue splits a big turn in two, and a group that gathers meanwhile goes at once', async () => {
    await admin.flushall();
    const caller = decideCaller(withScripts(engineRedis), { script: 'decideSingleRegion' });
    const { counted, sizes, calls } = recording(caller);
    const batcher = createDecideBatcher(counted, { pipelineAt: 4 });
    // Ten in one turn with nothing in flight: two calls of five, both sent before either answers.
    const first = Array.from({ length: 10 }, (_, i) => batcher.submit(fixedWindowCall(`qf:{s1}:a${i}`), 0));
    await new Promise((resolve) => setImmediate(resolve));
    expect(sizes).toEqual([5, 5]);
    expect(calls.inFlight).toBe(2);
    // Two in flight: what gathers now waits, however many.
    const second = Array.from({ length: 6 }, (_, i) => batcher.submit(fixedWindowCall(`qf:{s1}:b${i}`), 0));
    await new Promise((resolve) => setImmediate(resolve));
    expect(sizes).toEqual([5, 5]);
    const replies = (await Promise.all([...first, ...second])) as unknown[][];
    expect(replies.every((reply) => reply[0] === 1)).toBe(true);
    // The six went as one call once a call had answered (one in flight, six >= pipelineAt).
    expect(sizes).toEqual([5, 5, 6]);
    expect(calls.mostInFlight).toBe(2);
    // One in flight, three gathered: fewer than pipelineAt, so they wait for its answer.
    const lone = batcher.submit(fixedWindowCall('qf:{s1}:c0'), 0);
    await new Promise((resolve) => setImmediate(resolve));
    sizes.length = 0;
    const trickle = [1, 2, 3].map((i) => batcher.submit(fixedWindowCall(`qf:{s1}:c${i}`), 0));
    await Promise.all([lone, ...trickle]);
    expect(sizes).toEqual([3]);
  });

  it('answers an error for the one call of a batch that fails, and decides the others', async () => {
    await admin.flushall();
    const redis = withScripts(engineRedis);
    const caller = decideCaller(redis, { script: 'decideSingleRegion' });
    const batcher = createDecideBatcher(caller);
    // An unknown algorithm code: the script raises an error for that call only.
    const bad = fixedWindowCall('qf:{s1}:bad').map((arg) => (arg === 'fw' ? 'zz' : arg));
    const results = await Promise.allSettled([
      batcher.submit(fixedWindowCall('qf:{s1}:x'), 0),
      batcher.submit(fixedWindowCall('qf:{s1}:y'), 0),
      batcher.submit(bad, 0),
      batcher.submit(fixedWindowCall('qf:{s1}:y'), 0),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((results[3] as PromiseFulfilledResult<unknown[]>).value[3]).toBe(3);
  });

  it("a lean batch mixing one-rule calls with other calls, pinned clocks with Redis's, and failing calls decides what decide.lua decides one by one", async () => {
    const redis = withScripts(engineRedis);
    const lean = decideCaller(redis, { script: 'decideSingleRegion' });
    const reference = decideCaller(redis, { script: 'decide' });
    // Each shape's rules (code, limit, period, burst, then budget, lease ttl, lease id, shadow after the cost).
    const SHAPES: Record<string, [string, number, number, number, number, number, string, 0 | 1][]> = {
      fw: [['fw', 5, 1_000, 5, -1, 30_000, '', 0]],
      fwShadow: [['fw', 2, 60_000, 2, -1, 30_000, '', 1]],
      tb: [['tb', 5, 2_000, 4, -1, 30_000, '', 0]],
      tbFw: [
        ['tb', 5, 2_000, 4, -1, 30_000, '', 0],
        ['fw', 5, 1_000, 5, -1, 30_000, '', 0],
      ],
      sw: [['sw', 7, 4_000, 7, -1, 30_000, '', 0]],
      cc: [['cc', 3, 60_000, 3, -1, 2_000, 'lease', 0]],
      // An unknown algorithm (decide raises), a fixed window on a key that holds a string (WRONGTYPE), and
      // one without its state key (the next call's keys are not its own).
      bad: [['zz', 5, 1_000, 5, -1, 30_000, '', 0]],
      wrongType: [['fw', 5, 1_000, 5, -1, 30_000, '', 0]],
      noKey: [['fw', 5, 1_000, 5, -1, 30_000, '', 0]],
    };
    const spec = fc.record({
      shape: fc.constantFrom(...Object.keys(SHAPES)),
      key: fc.constantFrom('a', 'b'),
      cost: fc.constantFrom(1, 1, 2),
      // undefined: no pinned clock (the batch's Redis TIME).
      clock: fc.option(fc.constantFrom(0, 0, 400, 1_500, 2_600), { nil: undefined }),
    });
    const build = (s: { shape: string; key: string; cost: number }, now: number | ''): (string | number)[] => {
      const rules = SHAPES[s.shape]!;
      const keys = s.shape === 'noKey' ? [] : rules.map(([code]) => (s.shape === 'wrongType' ? 'qf:{s1}:str' : `qf:{s1}:${code}:${s.key}`));
      const call: (string | number)[] = [1 + keys.length, 'qf:{s1}:m', ...keys, 0, 1, '1000000', 1000, rules.length, now];
      for (const [code, limit, period, burst, budget, ttl, lease, shadow] of rules) {
        call.push(code, limit, period, burst, s.cost, budget, ttl, lease, shadow);
      }
      return call;
    };
    const reset = async () => {
      await admin.flushall();
      await admin.set('qf:{s1}:str', 'x');
    };
    let unpinned = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(spec, { minLength: 2, maxLength: 40 }),
        fc.integer({ min: 1_800_000_000_000, max: 1_800_000_100_000 }),
        async (specs, start) => {
          await reset();
          const calls = specs.map((s) => build(s, s.clock === undefined ? '' : start + s.clock));
          const replies = await lean.batch(calls);
          const state = await dump();
          // The batch read Redis TIME once for its unpinned calls: decide them one by one at that clock.
          const batchNow = specs
            .map((s, i) => (s.clock === undefined && Array.isArray(replies[i]) ? (replies[i] as number[])[1] : undefined))
            .find((now) => now !== undefined);
          if (batchNow !== undefined) unpinned++;
          await reset();
          for (let i = 0; i < calls.length; i++) {
            const s = specs[i]!;
            const expected = await reference(build(s, s.clock === undefined ? (batchNow ?? start) : start + s.clock)).then(
              (reply) => reply,
              (error: unknown) => error,
            );
            if (expected instanceof Error) expect(replies[i], `call ${i}`).toBeInstanceOf(Error);
            else expect(replies[i], `call ${i}`).toEqual(expected);
          }
          expect(await dump()).toEqual(state);
        },
      ),
      { numRuns: 60 },
    );
    expect(unpinned).toBeGreaterThan(10);
  }, 120_000);
});

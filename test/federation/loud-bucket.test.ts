// A loud token bucket decided in scalars (lua/includes/loud_bucket.lua) answers and writes exactly what the general
// path's view (load_bucket, decide_bucket) does. fast-check draws loud hashes (slot ids of the kept epochs, stale
// slots, every region's counts, this region's admission time, transfers to and from it, cells the decision does not
// read), recovery fences and a few decisions at later clocks; each case runs on two copies of the key in one real
// redis-server, one through decide.lua as it is and one with the scalar path switched off, and compares every reply,
// the key's fields, the pending sets, the fast lane and the bell after each decision.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { keyLayout, shardOf, type KeyLayout } from '../../src/keys.ts';
import { decideCall, decideShardKeys } from '../../src/store/decide-calls.ts';
import { scriptSource } from '../../src/store/lua-source.ts';
import { client, useRedis } from '../harness/redis.ts';

const server = await useRedis();
const redis = client(server.url);
const KEY = 'loud-key';
const PERIOD = 60_000;
const UNITS = [333_333, 333_333, 333_334];
const SCALAR = scriptSource('decide');
// The switch: loud_bucket answers nil at once, so token_bucket.lua and decide.lua's decide_loud both leave the key to
// load_bucket's view.
const SWITCH = 'local function loud_bucket(p, rule, fence, now, flat, map)\n  if p.unbounded then return nil end';
if (!SCALAR.includes(SWITCH)) throw new Error('loud_bucket.lua: the loud path switch moved');
const GENERAL = SCALAR.replace(SWITCH, 'local function loud_bucket(p, rule, fence, now, flat, map)\n  if true then return nil end');
const sides = [
  { layout: keyLayout('scalar'), source: SCALAR },
  { layout: keyLayout('general'), source: GENERAL },
] as const;
// A third copy whose scalar path raises where it would answer: which branch answered each decision (coverage).
const ADMITS = '  return tokens, capacity, bucket_rate(p, share), store, gossip, false, nil, quota, skips';
const DENIES = "    return tokens, capacity, bucket_rate(p, share), no_write, 'silent', false, nil, quota";
if (!SCALAR.includes(ADMITS) || !SCALAR.includes(DENIES)) throw new Error('loud_bucket.lua: its answers moved');
const PROBE = SCALAR.replace(ADMITS, "  error('scalar admission')").replace(DENIES, "    error('scalar denial')");
const probe = keyLayout('probe');
// A fourth copy whose decide_loud (decide.lua: a loud decision on the silent path's frame, no message) raises where
// it answers: how many of the scalar path's answers skip the general loop.
const DIRECT =
  '      if verdict ~= nil then\n        return verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased\n      end';
if (!SCALAR.includes(DIRECT)) throw new Error('decide.lua: decide_loud moved');
const DIRECT_PROBE = SCALAR.replace(
  DIRECT,
  "      if verdict ~= nil then error(verdict == 1 and 'direct admission' or 'direct denial') end",
);

interface Case {
  self: number;
  limit: number;
  budget: number;
  epoch: number;
  fenceAgo: number | null;
  fields: [string, string][];
  steps: { after: number; cost: number; peek: boolean }[];
}

// How long ago or after, in ms: often within the pace's reach (a loud key's admissions tens of ms apart), else anywhere.
const soon = fc.oneof(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 2 * PERIOD }));
// Share units moved: often a peer's whole share (a bystander's grant, a return), else any part of it.
const share = fc.oneof(fc.constant(333_334), fc.constant(333_333), fc.integer({ min: 1, max: 333_334 }));
const cells = (self: number) =>
  fc
    .record({
      counts: fc.array(fc.option(fc.integer({ min: 1, max: 400 }), { nil: undefined }), { minLength: 3, maxLength: 3 }),
      at: fc.option(soon, { nil: undefined }),
      given: fc.array(fc.option(share, { nil: undefined }), { minLength: 3, maxLength: 3 }),
      taken: fc.array(fc.option(share, { nil: undefined }), { minLength: 3, maxLength: 3 }),
      between: fc.option(fc.integer({ min: 1, max: 333_334 }), { nil: undefined }),
    })
    .map((drawn) => ({ ...drawn, self }));

const cases: fc.Arbitrary<Case> = fc
  .record({
    self: fc.integer({ min: 0, max: 2 }),
    limit: fc.constantFrom(10, 100, 1000),
    budget: fc.constantFrom(0, 5, 50),
    epoch: fc.integer({ min: 30_000_000, max: 30_000_100 }),
    offset: fc.integer({ min: 0, max: PERIOD - 1 }),
    fenceAgo: fc.option(fc.integer({ min: 0, max: 3 * PERIOD }), { nil: null }),
    tokens: fc.double({ min: 0, max: 1200, noNaN: true }),
    lastAgo: fc.integer({ min: 0, max: 3 * PERIOD }),
    // Per kept epoch (now's, the one before, the one before that): absent, held, or its slot holding an older epoch.
    slots: fc.array(fc.constantFrom('absent', 'held', 'stale'), { minLength: 3, maxLength: 3 }),
    // No peer shows in the epoch or the one before (the key turned loud in an older one): the pace decides its gossip;
    // or the peers show there only what this region gave them (transfers from it, no count, nothing back).
    quiet: fc.constantFrom('no', 'quiet', 'given'),
    // Peers that gave this region their whole share in now's epoch and show nothing else there (bystanders, whom a
    // round report skips): a hot key's steady state while the other regions are idle.
    bystanders: fc.constantFrom(0, 0, 1, 2),
    steps: fc.array(
      fc.record({
        after: fc.oneof(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 20_000 })),
        cost: fc.integer({ min: 1, max: 3 }),
        peek: fc.boolean(),
      }),
      {
        minLength: 1,
        maxLength: 4,
      },
    ),
  })
  .chain((drawn) =>
    fc.array(cells(drawn.self), { minLength: 3, maxLength: 3 }).map((slotCells) => {
      const now = drawn.epoch * PERIOD + drawn.offset;
      const fields: [string, string][] = [
        ['tokens', String(drawn.tokens)],
        ['last_refill', String(now - drawn.lastAgo)],
        ['sig', '333333'],
        ['v', '7'],
      ];
      drawn.slots.forEach((held, back) => {
        if (held === 'absent') return;
        const id = drawn.epoch - back - (held === 'stale' ? 3 : 0);
        const k = ((id % 3) + 3) % 3;
        const cell = slotCells[back]!;
        const peersQuiet = drawn.quiet !== 'no' && back < 2;
        const peers = [0, 1, 2].filter((o) => o !== drawn.self);
        const bystander = (o: number) => held === 'held' && back === 0 && peers.indexOf(o) >= 0 && peers.indexOf(o) < drawn.bystanders;
        fields.push([`w${k}`, String(id)]);
        cell.counts.forEach(
          (count, o) =>
            count !== undefined && (o === drawn.self || (!peersQuiet && !bystander(o))) && fields.push([`c${k}.${o}`, String(count)]),
        );
        if (cell.at !== undefined) fields.push([`t${k}.${drawn.self}`, String(Math.max(1, now - cell.at))]);
        for (let d = 0; d < 3; d++) {
          if (d === drawn.self) continue;
          if (bystander(d)) {
            fields.push([`x${k}.${d}.${drawn.self}`, String(UNITS[d])]);
            continue;
          }
          const given = cell.given[d];
          if (peersQuiet) {
            if (drawn.quiet === 'given' && given !== undefined) fields.push([`x${k}.${drawn.self}.${d}`, String(given)]);
            continue;
          }
          const taken = cell.taken[d];
          if (given !== undefined) fields.push([`x${k}.${drawn.self}.${d}`, String(given)]);
          if (taken !== undefined) fields.push([`x${k}.${d}.${drawn.self}`, String(taken)]);
        }
        // A transfer between the two peers: a cell the decision does not read.
        const [p1, p2] = [0, 1, 2].filter((o) => o !== drawn.self) as [number, number];
        if (cell.between !== undefined) fields.push([`x${k}.${p1}.${p2}`, String(cell.between)]);
      });
      return {
        self: drawn.self,
        limit: drawn.limit,
        budget: drawn.budget,
        epoch: drawn.epoch,
        fenceAgo: drawn.fenceAgo,
        fields,
        steps: drawn.steps.map((step, i) => ({ ...step, after: i === 0 ? drawn.offset : step.after })),
      };
    }),
  );

function callOf(layout: KeyLayout, c: Case, now: number, cost: number, peek: boolean): (string | number)[] {
  const shard = shardOf(KEY);
  return decideCall({
    fixedKeys: decideShardKeys(
      layout,
      shard,
      [0, 1, 2].filter((o) => o !== c.self),
    ),
    ruleKeys: [layout.stateKey(shard, 'per-key', KEY)],
    rules: [{ head: ['tb', c.limit, PERIOD, c.limit], budget: c.budget, leaseTtl: 30_000, shadow: 0 }],
    topology: { selfIndex: c.self, unitsCsv: UNITS.join(','), maxClockSkewMs: 1000, horizonMs: 10_000 },
    regions: 3,
    cost,
    leaseId: '',
    now,
    peek,
  });
}

/** What a decision leaves on one side: the key's fields, the pending sets, the fast lane and the bell. */
async function stateOf(layout: KeyLayout, c: Case): Promise<unknown> {
  const shard = shardOf(KEY);
  // Key names without the side's prefix.
  const named = (names: string[]) => names.map((name) => name.replace(`${layout.prefix}:`, ''));
  const pending = [];
  for (const peer of [0, 1, 2].filter((o) => o !== c.self))
    pending.push(named(await redis.zrange(layout.peerPendingKey(shard, peer), '0', '-1', 'WITHSCORES')));
  return {
    fields: await redis.hgetall(layout.stateKey(shard, 'per-key', KEY)),
    ttl: (await redis.pttl(layout.stateKey(shard, 'per-key', KEY))) > 0,
    pending,
    fast: named(await redis.smembers(layout.fastSetKey(shard))),
    bell: await redis.type(layout.bellKey(shard)),
  };
}

describe('a loud token bucket decided in scalars (loud_bucket.lua)', () => {
  it('answers and writes what load_bucket and decide_bucket do, decision after decision', async () => {
    const shas = await Promise.all(sides.map(({ source }) => redis.script('LOAD', source) as Promise<string>));
    const probeSha = (await redis.script('LOAD', PROBE)) as string;
    const directSha = (await redis.script('LOAD', DIRECT_PROBE)) as string;
    const answered = { admission: 0, denial: 0, general: 0 };
    const direct = { admission: 0, denial: 0, other: 0 };
    let decisions = 0;
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        await redis.flushdb();
        const now0 = c.epoch * PERIOD;
        for (const { layout } of sides) {
          const shard = shardOf(KEY);
          await redis.hset(layout.stateKey(shard, 'per-key', KEY), Object.fromEntries(c.fields));
          await redis.pexpire(layout.stateKey(shard, 'per-key', KEY), 600_000);
          // A recovery fence some time before the first decision (a data loss), or none.
          const fence = c.fenceAgo === null ? 0 : Math.max(1, now0 + c.steps[0]!.after - c.fenceAgo);
          await redis.hset(layout.shardMarkerKey(shard), 'fence', String(fence));
        }
        let now = now0;
        for (const step of c.steps) {
          now += step.after;
          // Which branch answers this decision: the probe copy starts from the scalar copy's state.
          const shard = shardOf(KEY);
          const held = await redis.hgetall(sides[0].layout.stateKey(shard, 'per-key', KEY));
          const fenceText = (await redis.hget(sides[0].layout.shardMarkerKey(shard), 'fence'))!;
          const probeFrom = async (sha: string) => {
            await redis.del(probe.stateKey(shard, 'per-key', KEY));
            await redis.hset(probe.stateKey(shard, 'per-key', KEY), held);
            await redis.hset(probe.shardMarkerKey(shard), 'fence', fenceText);
            return redis.evalsha(sha, ...(callOf(probe, c, now, step.cost, step.peek) as [number, ...string[]])).then(
              () => null,
              (error: Error) => error.message,
            );
          };
          const probed = await probeFrom(probeSha);
          const branch =
            probed === null
              ? 'general'
              : probed.includes('scalar admission')
                ? 'admission'
                : probed.includes('scalar denial')
                  ? 'denial'
                  : probed;
          answered[branch as keyof typeof answered]++;
          const shortcut = await probeFrom(directSha);
          direct[shortcut?.includes('direct admission') ? 'admission' : shortcut?.includes('direct denial') ? 'denial' : 'other']++;
          const replies = [];
          for (const [i, { layout }] of sides.entries()) {
            const call = callOf(layout, c, now, step.cost, step.peek);
            replies.push(await redis.evalsha(shas[i]!, ...(call as [number, ...string[]])));
          }
          expect(replies[0], `reply at ${now}`).toEqual(replies[1]);
          expect(await stateOf(sides[0].layout, c)).toEqual(await stateOf(sides[1].layout, c));
          decisions++;
        }
      }),
      { numRuns: 400 },
    );
    console.log('loud bucket:', JSON.stringify({ decisions, answered, direct }));
    expect(decisions).toBeGreaterThan(300);
    // Both branches of the scalar path answered many decisions, and the general path took the rest.
    expect(answered.admission).toBeGreaterThan(50);
    expect(answered.denial).toBeGreaterThan(50);
    expect(answered.general).toBeGreaterThan(50);
    expect(answered.admission + answered.denial + answered.general).toBe(decisions);
    // decide_loud answered admissions and denials without the general loop; the rest of the scalar path's answers
    // (an admission the peers must hear of, a peek) went through decide_prepared.
    expect(direct.admission).toBeGreaterThan(20);
    expect(direct.denial).toBeGreaterThan(20);
    expect(direct.admission + direct.denial).toBeLessThanOrEqual(answered.admission + answered.denial);
  });
});

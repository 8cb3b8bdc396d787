// The v3 gossip payload (src/federation/gossip/wire.ts) without Redis: every entry apply_gossip.lua takes comes
// back bit for bit, whatever its numbers; arbitrary input is refused, never thrown out of verify(); and the size of
// a typical key update is pinned (computed from the encoding, not timed).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { slotLength, timeCellsOffset } from '../../src/federation/gossip/cells.ts';
import { encodeJob, LIMITS, MESSAGE_VERSION, verify, type GossipMessage } from '../../src/federation/gossip/message.ts';
import { encodePayload, openPayload, type GossipEntry } from '../../src/federation/gossip/wire.ts';
import { parseConfig } from '../../src/config/load.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { KEY_SHARDS } from '../../src/keys.ts';

const FP = 'Zm9vYmFyYmF6cXV4';
const SENT_AT = 1_796_168_253_767;
const SEQ = SENT_AT * 1000 + 17;
const HASH_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'.split('');

const arbitraryKey = fc
  .record({
    shard: fc.integer({ min: 0, max: KEY_SHARDS - 1 }),
    rule: fc.constantFrom('per-key', 'search', 'a.b_c-9', 'x'.repeat(64)),
    hash: fc.array(fc.constantFrom(...HASH_CHARS), { minLength: 16, maxLength: 16 }).map((chars) => chars.join('')),
  })
  .map(({ shard, rule, hash }) => `qf:{s${shard}}:${rule}:${hash}`);

/** -0 travels as a zero cell, that is not at all: compare with +0. */
const plain = (value: number) => (Object.is(value, -0) ? 0 : value);

/** Cells as a sender's state holds them: mostly zero, small counts, share units, fractional tokens, times. */
function validSlot(n: number): fc.Arbitrary<number[]> {
  const width = slotLength(n);
  const times = timeCellsOffset(n);
  const amounts = 1 + n + n * n;
  const cell = (i: number): fc.Arbitrary<number> => {
    if (i >= times)
      return fc.oneof(
        fc.constant(0),
        fc.integer({ min: 0, max: LIMITS.maxTime }),
        fc.integer({ min: SENT_AT - 120_000, max: SENT_AT + 500 }),
      );
    if (i >= amounts)
      return fc.oneof(
        fc.constant(0),
        fc.nat(1_000),
        fc.double({ min: 0, max: 1e6, noNaN: true }).map(plain),
        fc.constant(333.33300000000003),
      );
    return fc.oneof(fc.constant(0), fc.nat(40), fc.constant(333_333), fc.integer({ min: 0, max: LIMITS.maxCount }));
  };
  return fc.tuple(
    fc.oneof(fc.integer({ min: 29_000_000, max: 29_000_003 }), fc.integer({ min: 0, max: LIMITS.maxTime })),
    ...Array.from({ length: width - 1 }, (_, i) => cell(i + 1)),
  );
}

/** Any float64 in any cell, id and change time: the wire must carry it unchanged for the range checks to judge. */
function wildSlot(n: number): fc.Arbitrary<number[]> {
  return fc.array(fc.double().map(plain), { minLength: slotLength(n), maxLength: slotLength(n) });
}

function arbitraryMessage(n: number, slot: (n: number) => fc.Arbitrary<number[]>, t: fc.Arbitrary<number>): fc.Arbitrary<GossipMessage> {
  const entry: fc.Arbitrary<GossipEntry> = fc.record({ k: arbitraryKey, t, s: fc.array(slot(n), { maxLength: 3 }) });
  return fc.record({
    v: fc.constant(MESSAGE_VERSION),
    kind: fc.constantFrom('gossip', 'heartbeat', 'resync'),
    from: fc.constantFrom('a', 'us-east', 'x'.repeat(32)),
    to: fc.constantFrom('b', 'eu-west-2'),
    fp: fc.constant(FP),
    seq: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    sentAt: fc.oneof(fc.constant(SENT_AT), fc.nat({ max: LIMITS.maxTime })),
    entries: fc.array(entry, { maxLength: 6 }),
  });
}

const roundTrip = (message: GossipMessage, n: number): GossipMessage => {
  const { header, entries } = openPayload(encodePayload(message, n));
  return { v: MESSAGE_VERSION, ...header, entries: entries(n, LIMITS.maxEntries) };
};

describe('round trip', () => {
  for (const n of [1, 2, 3, 5]) {
    it(`gives back every valid message of ${n} region(s)`, () => {
      fc.assert(
        fc.property(
          arbitraryMessage(n, validSlot, fc.oneof(fc.integer({ min: SENT_AT - 60_000, max: SENT_AT }), fc.nat({ max: LIMITS.maxTime }))),
          (message) => {
            expect(roundTrip(message, n)).toEqual(message);
          },
        ),
        { numRuns: 300 },
      );
    });
  }

  it('gives back any float64 in any cell, window id and change time (NaN, infinities, negatives, fractions)', () => {
    fc.assert(
      fc.property(arbitraryMessage(3, wildSlot, fc.double().map(plain)), (message) => {
        const back = roundTrip(message, 3);
        expect(back.entries.length).toBe(message.entries.length);
        back.entries.forEach((entry, i) => {
          const sent = message.entries[i]!;
          expect(entry.k).toBe(sent.k);
          expect(Object.is(entry.t, sent.t)).toBe(true);
          entry.s.forEach((slot, j) =>
            slot.forEach((value, c) => expect(Object.is(value, sent.s[j]![c]), `slot ${j} cell ${c}`).toBe(true)),
          );
        });
      }),
      { numRuns: 300 },
    );
  });

  it('refuses to encode what no sender produces', () => {
    const base: GossipMessage = { v: 3, kind: 'gossip', from: 'a', to: 'b', fp: FP, seq: 1, sentAt: SENT_AT, entries: [] };
    const key = 'qf:{s1}:per-key:AAAAAAAAAAAAAAAA';
    expect(() => encodePayload({ ...base, seq: -3 }, 3)).toThrow(RangeError);
    expect(() => encodePayload({ ...base, sentAt: 1.5 }, 3)).toThrow(RangeError);
    expect(() => encodePayload({ ...base, fp: 'short' }, 3)).toThrow(RangeError);
    expect(() => encodePayload({ ...base, entries: [{ k: 'qf:meta', t: 1, s: [] }] }, 3)).toThrow(RangeError);
    expect(() => encodePayload({ ...base, entries: [{ k: key, t: 1, s: [[1, 2]] }] }, 3)).toThrow(RangeError);
    const slot = new Array<number>(slotLength(3)).fill(0);
    expect(() => encodePayload({ ...base, entries: [{ k: key, t: 1, s: [slot, slot, slot, slot] }] }, 3)).toThrow(RangeError);
  });
});

describe('hostile payloads', () => {
  const config = parseConfig({
    region: 'b',
    federation: {
      secret: 'wire-secret-0123456789abcdef',
      peers: [
        { name: 'a', redisUrl: 'redis://127.0.0.1:1' },
        { name: 'c', redisUrl: 'redis://127.0.0.1:2' },
      ],
    },
    rules: [{ name: 'per-key', limit: 10 }],
  });
  const topology = topologyOf(config);
  const reasons = new Set([
    'invalid',
    'oversized',
    'bad_mac',
    'unknown_region',
    'wrong_destination',
    'fingerprint',
    'out_of_range',
    'version',
  ]);
  const alphabetString = fc.array(fc.constantFrom(...HASH_CHARS), { maxLength: 400 }).map((chars) => chars.join(''));

  it('never throws and never accepts arbitrary data, strings or alphabet noise under a secret', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.anything(),
          fc.string().map((p) => ({ v: 3, p })),
          alphabetString.map((p) => ({ v: 3, p })),
          fc.record({
            v: fc.constant(3),
            p: alphabetString,
            m: fc.array(fc.constantFrom(...HASH_CHARS), { minLength: 22, maxLength: 22 }).map((c) => c.join('')),
          }),
        ),
        (data) => {
          const verdict = verify(data, 100, topology, 'b', config.federation.secret);
          expect(verdict.ok).toBe(false);
          if (!verdict.ok) expect(reasons.has(verdict.reason)).toBe(true);
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('without a secret, reads alphabet noise as invalid or out of range, never as a crash', () => {
    fc.assert(
      fc.property(alphabetString, (p) => {
        const verdict = verify({ v: 3, p }, 100, topology, 'b', undefined);
        if (!verdict.ok) expect(reasons.has(verdict.reason)).toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses every truncation and every one-character change of a signed job, the entries included', () => {
    const slot = new Array<number>(slotLength(3)).fill(0);
    slot[0] = 29_936_137;
    slot[1] = 7;
    slot[timeCellsOffset(3)] = SENT_AT - 40;
    const message: GossipMessage = {
      v: 3,
      kind: 'gossip',
      from: 'a',
      to: 'b',
      fp: topology.fingerprint,
      seq: SEQ,
      sentAt: SENT_AT,
      entries: [{ k: 'qf:{s9}:per-key:AAAAAAAAAAAAAAAA', t: SENT_AT - 5, s: [slot] }],
    };
    const job = encodeJob(message, 3, config.federation.secret);
    expect(verify(job, 100, topology, 'b', config.federation.secret)).toMatchObject({ ok: true, message });
    for (let at = 0; at < job.p.length; at++) {
      expect(verify({ ...job, p: job.p.slice(0, at) }, 100, topology, 'b', config.federation.secret).ok).toBe(false);
      for (const replacement of ['A', 'g', '_', '!']) {
        if (job.p[at] === replacement) continue;
        const p = `${job.p.slice(0, at)}${replacement}${job.p.slice(at + 1)}`;
        const verdict = verify({ ...job, p }, 100, topology, 'b', config.federation.secret);
        expect(verdict.ok, `character ${at} → ${replacement}`).toBe(false);
        if (!verdict.ok) expect(['bad_mac', 'invalid']).toContain(verdict.reason);
      }
    }
  });
});

describe('bytes of a typical key update', () => {
  // The cells a 3-region fixed window's key carries when one region uses it and both peers answered (measured
  // from the gossip of a test federation): c[a], x[b→a] and x[c→a] (grants), a[a][a], a[b][a], a[c][a], t[a].
  const n = 3;
  const windowSlot = (id: number, used: number, lastUse: number) => {
    const slot = new Array<number>(slotLength(n)).fill(0);
    slot[0] = id;
    slot[1] = used; // c[a]
    slot[1 + n + 1 * n + 0] = 10; // x[b→a]
    slot[1 + n + 2 * n + 0] = 10; // x[c→a]
    for (const o of [0, 1, 2]) slot[1 + n + n * n + o * n + 0] = used; // a[o][a]
    slot[timeCellsOffset(n)] = lastUse; // t[a]
    return slot;
  };
  // A 3-region token bucket's epoch after a grant: c[a], x[c→a] share units, y[c→a] tokens (fractional), t[a].
  const bucketSlot = (id: number) => {
    const slot = new Array<number>(slotLength(n)).fill(0);
    slot[0] = id;
    slot[1] = 10;
    slot[1 + n + 2 * n + 0] = 333_333;
    slot[1 + n + n * n + 2 * n + 0] = 8.99999;
    slot[timeCellsOffset(n)] = SENT_AT - 2_064;
    return slot;
  };
  const hash = (i: number) => `k${String(i).padStart(15, '0')}`.replace(/[^A-Za-z0-9_-]/g, 'A');
  const key = (i: number) => `qf:{s${i % KEY_SHARDS}}:per-key:${hash(i)}`;
  const oneSlot = (i: number): GossipEntry => ({ k: key(i), t: SENT_AT - 89, s: [windowSlot(29_936_137, 3, SENT_AT - 271)] });
  const twoSlots = (i: number): GossipEntry => ({
    k: key(i),
    t: SENT_AT - 120,
    s: [windowSlot(898_084_060, 5, SENT_AT - 1_028), windowSlot(898_084_061, 2, SENT_AT - 120)],
  });
  const bucket = (i: number): GossipEntry => ({ k: key(i), t: SENT_AT - 590, s: [bucketSlot(29_936_137)] });
  const jobBytes = (entries: GossipEntry[], rules?: Record<string, string>) => {
    const message: GossipMessage = {
      v: 3,
      kind: 'gossip',
      from: 'us-east',
      to: 'eu-west',
      fp: FP,
      seq: SEQ,
      sentAt: SENT_AT,
      entries,
      rules,
    };
    return JSON.stringify(encodeJob(message, n, 'a-federation-secret-0123456789')).length;
  };
  /** What one more key update adds to a batch (the bench's measure: JSON bytes of the job data); 32 and 1,000 keys
   *  write their count in as many characters. */
  const perUpdate = (make: (i: number) => GossipEntry) =>
    (jobBytes(Array.from({ length: 1_000 }, (_, i) => make(i))) - jobBytes(Array.from({ length: 32 }, (_, i) => make(i)))) / 968;

  /** The same job as version 2 sent it: JSON of every cell, names, a 64-hex-digit MAC. */
  const v2Bytes = (entries: GossipEntry[]) =>
    JSON.stringify({
      v: 2,
      kind: 'gossip',
      from: 'us-east',
      to: 'eu-west',
      fp: FP,
      seq: SEQ,
      sentAt: SENT_AT,
      entries,
      mac: 'f'.repeat(64),
    }).length;
  const v2PerUpdate = (make: (i: number) => GossipEntry) =>
    Math.round((v2Bytes(Array.from({ length: 1_000 }, (_, i) => make(i))) - v2Bytes(Array.from({ length: 32 }, (_, i) => make(i)))) / 968);

  it('is at most 48 bytes in a batch: one slot, two slots, a token bucket after a grant', () => {
    const sizes = { oneSlot: perUpdate(oneSlot), twoSlots: perUpdate(twoSlots), bucket: perUpdate(bucket) };
    const v2 = { oneSlot: v2PerUpdate(oneSlot), twoSlots: v2PerUpdate(twoSlots), bucket: v2PerUpdate(bucket) };
    console.info(
      JSON.stringify({ probe: 'gossip-wire-bytes', v3: sizes, v2, heartbeat: jobBytes([]), singleKeyJob: jobBytes([oneSlot(0)]) }),
    );
    expect(sizes).toEqual({ oneSlot: 29, twoSlots: 39, bucket: 35 });
    expect(v2).toEqual({ oneSlot: 139, twoSlots: 214, bucket: 149 });
    for (const size of Object.values(sizes)) expect(size).toBeLessThanOrEqual(48);
  });

  it('costs a job about 100 bytes of header, signature and rule table, half of the v2 header', () => {
    // A heartbeat is the header alone; a single-key job adds the rule table ("per-key" and its window base).
    console.info(
      JSON.stringify({ probe: 'gossip-job-bytes', v3: [jobBytes([]), jobBytes([oneSlot(0)])], v2: [v2Bytes([]), v2Bytes([oneSlot(0)])] }),
    );
    expect(jobBytes([])).toBe(98);
    expect(v2Bytes([])).toBe(211);
    // The rule table's fingerprint field: empty here (1 character), a sender's 8-character fingerprint (rule-identity.ts)
    // adds 8 more per rule and job.
    expect(jobBytes([oneSlot(0)])).toBe(145);
    expect(jobBytes([oneSlot(0)], { 'per-key': 'AbCdEfGh' })).toBe(153);
    expect(v2Bytes([oneSlot(0)])).toBe(348);
  });
});

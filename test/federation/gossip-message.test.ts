// The gossip job without Redis: state hashes decode into the cells apply_gossip.lua reads, a signature covers
// every value of a job (the payload's bytes), whatever the JSON key order of its data, and a job of another
// version is refused as such.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeState, flattenSlot, slotLength, unflattenSlot } from '../../src/federation/gossip/cells.ts';
import { encodeJob, macOf, verify, MESSAGE_VERSION, type GossipMessage } from '../../src/federation/gossip/message.ts';
import { topologyOf } from '../../src/protocol/index.ts';
import { parseConfig } from '../../src/config/load.ts';
import { ruleKey } from '../../src/keys.ts';

const SECRET = 'unit-secret-0123456789abcdef';
const config = parseConfig({
  region: 'b',
  federation: {
    secret: SECRET,
    peers: [
      { name: 'a', redisUrl: 'redis://127.0.0.1:1' },
      { name: 'c', redisUrl: 'redis://127.0.0.1:2' },
    ],
  },
  rules: [{ name: 'fw', limit: 10 }],
});
const topology = topologyOf(config);
const key = ruleKey('fw', { principal: 'k', dimensions: ['k'] });

describe('cells', () => {
  it('decodes a state hash into per-slot cells and leaves regional fields out of the gossip', () => {
    const state = decodeState(
      {
        w1: '100',
        'c1.0': '4',
        'c1.2': '9',
        'x1.2.0': '3',
        'a1.1.0': '4',
        w2: '101',
        'c2.0': '1',
        f1: '5',
        v: '12',
        t: '1700',
        tokens: '3.5',
        last_refill: '9',
      },
      3,
    );
    expect(state.version).toBe(12);
    expect(state.changedAt).toBe(1700);
    expect(state.regional).toEqual({ f1: '5', tokens: '3.5', last_refill: '9' });
    const slot = state.slots.find((s) => s.id === 100)!;
    expect(slot.c).toEqual([4, 0, 9]);
    expect(slot.x[2 * 3 + 0]).toBe(3);
    expect(slot.a[1 * 3 + 0]).toBe(4);
    expect(flattenSlot(slot)).toHaveLength(slotLength(3));
    expect(unflattenSlot(flattenSlot(slot), 3)).toEqual(slot);
  });
});

const n = topology.regions.length;
const sign = (message: GossipMessage) => encodeJob(message, n, SECRET);
/** The smallest message a sends b: a heartbeat, seq 1 at ms 1. */
const heartbeatFromA = (): GossipMessage => ({
  v: MESSAGE_VERSION,
  kind: 'heartbeat',
  from: 'a',
  to: 'b',
  fp: topology.fingerprint,
  seq: 1,
  sentAt: 1,
  entries: [],
});

describe('signature', () => {
  const arbitraryMessage = fc
    .record({
      counts: fc.array(fc.array(fc.nat(1_000_000), { minLength: slotLength(3) - 1, maxLength: slotLength(3) - 1 }), {
        minLength: 1,
        maxLength: 3,
      }),
      seq: fc.nat(),
    })
    .map(
      ({ counts, seq }): GossipMessage => ({
        v: MESSAGE_VERSION,
        kind: 'gossip',
        from: 'a',
        to: 'b',
        fp: topology.fingerprint,
        seq,
        sentAt: 1_700_000_000_000,
        entries: [{ k: key, t: 1_700_000_000_000, s: counts.map((cells, i) => [29_000_000 + i, ...cells]) }],
      }),
    );

  it('verifies what was signed, whatever the key order, and nothing that was changed after signing', () => {
    fc.assert(
      fc.property(arbitraryMessage, fc.nat(), fc.integer({ min: 1, max: 1000 }), (message, pick, delta) => {
        const signed = sign(message);
        const reordered = Object.fromEntries(Object.entries(JSON.parse(JSON.stringify(signed))).reverse());
        expect(verify(reordered, 100, topology, 'b', SECRET)).toMatchObject({ ok: true, message });

        // Any cell changed, then encoded again under the old MAC.
        const tampered = structuredClone(message);
        const slot = tampered.entries[0]!.s[pick % tampered.entries[0]!.s.length]!;
        const index = 1 + (pick % (slot.length - 1));
        slot[index] = slot[index]! + delta;
        const forged = { ...encodeJob(tampered, n, undefined), m: signed.m };
        const verdict = verify(forged, 100, topology, 'b', SECRET);
        expect(verdict.ok).toBe(false);
        if (!verdict.ok) expect(verdict.reason).toBe('bad_mac');
      }),
      { numRuns: 200 },
    );
  });

  it('signs the version with the payload: 16 bytes of HMAC-SHA256, in base64url', () => {
    const job = sign(heartbeatFromA());
    expect(job.m).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(job.m).toBe(macOf(job.p, SECRET));
    expect(macOf(job.p, 'another-secret-0123456789')).not.toBe(job.m);
  });

  it('accepts unsigned gossip only when no secret is configured', () => {
    const message = heartbeatFromA();
    const unsigned = encodeJob(message, n, undefined);
    expect(verify(unsigned, 100, topology, 'b', undefined).ok).toBe(true);
    expect(verify(unsigned, 100, topology, 'b', SECRET)).toMatchObject({ ok: false, reason: 'bad_mac', from: 'a' });
  });
});

describe('versions', () => {
  it('refuses a version 2 job (the JSON of every cell) as `version`, named after its sender, and any other version', () => {
    const v2 = {
      v: 2,
      kind: 'gossip',
      from: 'a',
      to: 'b',
      fp: topology.fingerprint,
      seq: 1,
      sentAt: 1_700_000_000_000,
      entries: [{ k: key, t: 1_700_000_000_000, s: [[29_000_000, ...new Array<number>(slotLength(n) - 1).fill(0)]] }],
      mac: 'f'.repeat(64),
    };
    expect(verify(v2, 300, topology, 'b', SECRET)).toEqual({
      ok: false,
      reason: 'version',
      from: 'a',
      detail: 'message version 2, this region reads 3',
    });
    const job = sign(heartbeatFromA());
    // A later version's layout is unknown here: its sender is not read from it.
    expect(verify({ ...job, v: 4 }, 100, topology, 'b', SECRET)).toMatchObject({ ok: false, reason: 'version', from: undefined });
    expect(verify({ ...job, v: '3' }, 100, topology, 'b', SECRET)).toMatchObject({ ok: false, reason: 'invalid' });
  });
});

describe('ranges', () => {
  const message = (slot: number[]) =>
    sign({
      v: MESSAGE_VERSION,
      kind: 'gossip',
      from: 'a',
      to: 'b',
      fp: topology.fingerprint,
      seq: 1,
      sentAt: 1_700_000_000_000,
      entries: [{ k: key, t: 1_700_000_000_000, s: [slot] }],
    });
  const slot = () => [29_000_000, ...new Array<number>(slotLength(n) - 1).fill(0)];
  const aCell = 1 + n + n * n; // id, c[n], x[n·n], then a[n·n] (tokens moved with share, y, for token buckets)

  it('accepts the fractional tokens a token bucket sends in its a cells (a grant of 333.333 tokens)', () => {
    const cells = slot();
    cells[1 + n + 0 * n + 2] = 333_333; // x[a→c]: share units
    cells[aCell + 0 * n + 2] = 333.33300000000003; // y[a→c]: tokens
    const verdict = verify(message(cells), 100, topology, 'b', SECRET);
    expect(verdict).toMatchObject({ ok: true });
    if (verdict.ok) expect(verdict.message.entries[0]!.s[0]).toEqual(cells);
  });

  it('still refuses fractional, negative or non-finite counts and transfers, and negative tokens', () => {
    for (const [at, value] of [
      [1, 0.5],
      [1 + n, 2.5],
      [1, -1],
      [1, Number.NaN],
      [1 + n, Number.POSITIVE_INFINITY],
      [aCell, -0.5],
      [0, -1],
    ] as const) {
      const cells = slot();
      cells[at] = value;
      expect(verify(message(cells), 100, topology, 'b', SECRET), `cell ${at} = ${value}`).toMatchObject({
        ok: false,
        reason: 'out_of_range',
      });
    }
  });
});

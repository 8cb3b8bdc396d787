// Gossip integrity: forged, unsigned, truncated, old-version, unknown-sender, misdirected, foreign-topology,
// replayed, out-of-range and oversized jobs land in region b's real gossip queue; every one is rejected,
// counted by reason, and no counter changes.
import { Queue, type Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slotLength } from '../../src/federation/gossip/cells.ts';
import { encodeJob, LIMITS, macOf, MESSAGE_VERSION, type GossipMessage } from '../../src/federation/gossip/message.ts';
import { GOSSIP_QUEUE } from '../../src/federation/gossip/worker.ts';
import { startTestFederation, type TestFederation, type TestRegion } from '../support/federation.ts';
import { eventually } from '../support/wait.ts';
import { GOSSIP_QUEUE_PREFIX, replayKey, ruleKey } from '../../src/keys.ts';

const SECRET = 'integrity-secret-0123456789abcdef';
let fed: TestFederation;
let b: TestRegion;
let inbound: Queue;

beforeAll(async () => {
  fed = await startTestFederation({
    names: ['a', 'b'],
    secret: SECRET,
    syncIntervalMs: 50,
    rules: [{ name: 'fw', by: ['apiKey'], algorithm: 'fixedWindow', limit: 1_000, period: '60s' }],
  });
  b = fed.region('b');
  inbound = new Queue(GOSSIP_QUEUE, { connection: { host: '127.0.0.1', port: b.server.port }, prefix: GOSSIP_QUEUE_PREFIX });
});
afterAll(async () => {
  await inbound?.close();
  await fed?.close();
});

const n = 2;
/** The job of `message`, signed with `secret` (the federation's unless told). */
const sign = (message: GossipMessage, secret: string = SECRET) => encodeJob(message, n, secret);
const key = ruleKey('fw', { principal: 'victim', dimensions: ['victim'] });
let nextSeq = 5e15;

/** A well-formed gossip job from a claiming a's consumption of `count` in the current window. */
function message(count: number, overrides: Partial<GossipMessage> = {}): GossipMessage {
  const id = Math.floor(Date.now() / 60_000);
  const slot = new Array<number>(slotLength(n)).fill(0);
  slot[0] = id;
  slot[1] = count; // c[a]
  return {
    v: MESSAGE_VERSION,
    kind: 'gossip',
    from: 'a',
    to: 'b',
    fp: b.federation!.topology.fingerprint,
    seq: nextSeq++,
    sentAt: Date.now(),
    entries: [{ k: key, t: Date.now(), s: [slot] }],
    ...overrides,
  };
}

async function settle(job: Job): Promise<string> {
  return eventually(
    async () => {
      const state = await job.getState();
      return state === 'completed' || state === 'failed' ? state : undefined;
    },
    10_000,
    `job ${job.id} to finish`,
  );
}

async function rejectedCount(reason: string): Promise<number> {
  const metric = await b.registry.getSingleMetric('quotafed_federation_rejected_jobs_total')!.get();
  return metric.values.filter((value) => value.labels.reason === reason).reduce((sum, value) => sum + value.value, 0);
}

/**
 * Waits until gossip about the key has settled: an accepted job starts a legitimate exchange (b's merge changes
 * the key, a merges b's view, acknowledges, and b learns that acknowledgement), and a rejected job must be
 * judged against the settled state, not against a snapshot taken halfway through that exchange.
 */
async function settled(): Promise<void> {
  await eventually(
    async () => {
      const before = JSON.stringify(await b.redis.hgetall(key));
      await fed.flushAll();
      await new Promise((resolve) => setTimeout(resolve, 200));
      await fed.flushAll();
      return JSON.stringify(await b.redis.hgetall(key)) === before || undefined;
    },
    10_000,
    'gossip about the key to settle',
  );
}

async function expectRejected(data: unknown, reason: string): Promise<void> {
  await settled();
  const before = await b.redis.hgetall(key);
  const counted = await rejectedCount(reason);
  const job = await inbound.add('gossip', data as object);
  expect(await settle(job)).toBe('failed');
  expect((await inbound.getJob(job.id!))?.failedReason).toBe(`rejected: ${reason}`);
  // An oversized job is failed in Redis by the worker's screen before it is counted here (worker.ts).
  await eventually(
    async () => ((await rejectedCount(reason)) === counted + 1 ? true : undefined),
    5_000,
    `the ${reason} rejection to be counted`,
  );
  expect(await rejectedCount(reason)).toBe(counted + 1);
  expect(await b.redis.hgetall(key)).toEqual(before);
}

describe('gossip integrity', () => {
  it('applies a well-formed signed job (the baseline the hostile variants are measured against)', async () => {
    const job = await inbound.add('gossip', sign(message(5)));
    expect(await settle(job)).toBe('completed');
    expect(await b.redis.hget(key, `c${Math.floor(Date.now() / 60_000) % 3}.0`)).toBe('5');
  });

  it('rejects a forged MAC and an unsigned job', async () => {
    await expectRejected(sign(message(50), 'another-secret-0123456789'), 'bad_mac');
    await expectRejected(encodeJob(message(50), n, undefined), 'bad_mac');
    // A MAC over other contents: the count changed after signing.
    const original = message(50);
    const signed = sign(original);
    const changed = structuredClone(original);
    changed.entries[0]!.s[0]![1] = 500;
    await expectRejected({ ...encodeJob(changed, n, undefined), m: signed.m }, 'bad_mac');
  });

  it('rejects a version 2 job (the JSON of every cell) as `version`', async () => {
    const { v: _v, ...fields } = message(50);
    await expectRejected({ v: 2, ...fields, mac: 'f'.repeat(64) }, 'version');
  });

  it('rejects truncated and malformed jobs, signed or not', async () => {
    const { p: _p, ...noPayload } = sign(message(50));
    await expectRejected(noPayload, 'invalid');
    await expectRejected({ ...sign(message(50)), extra: 1 }, 'invalid');
    await expectRejected('not an object', 'invalid');
    // Validly signed payloads that do not decode: cut short, a character outside the alphabet, bytes after the end.
    const { p } = sign(message(50));
    for (const bad of [p.slice(0, -3), `${p.slice(0, -3)}!${p.slice(-2)}`, `${p}AAAA`])
      await expectRejected({ v: MESSAGE_VERSION, p: bad, m: macOf(bad, SECRET) }, 'invalid');
  });

  it('rejects jobs from unknown regions, for other regions or from another topology', async () => {
    await expectRejected(sign(message(50, { from: 'mallory' })), 'unknown_region');
    await expectRejected(sign(message(50, { from: 'b' })), 'unknown_region');
    await expectRejected(sign(message(50, { to: 'c' })), 'wrong_destination');
    await expectRejected(sign(message(50, { fp: 'AAAAAAAAAAAAAAAA' })), 'fingerprint');
  });

  it('rejects negative, NaN, fractional and absurd values', async () => {
    // The wire carries any float64 unchanged (a negative or NaN as its 8 bytes), so the range checks judge them.
    for (const value of [-1, 1.5, 1e300, 1e13, Number.NaN]) {
      const bad = message(50);
      bad.entries[0]!.s[0]![2] = value;
      await expectRejected(sign(bad), 'out_of_range');
    }
    await expectRejected(sign(message(50, { sentAt: LIMITS.maxTime + 1 })), 'out_of_range');
    // A negative or fractional seq has no encoding at all: no sender can send one.
    expect(() => sign(message(50, { seq: -3 }))).toThrow(RangeError);
  });

  it('rejects a replayed job', async () => {
    const job = sign(message(7));
    const first = await inbound.add('gossip', job);
    expect(await settle(first)).toBe('completed');
    expect(await b.redis.zscore(replayKey('a'), String(nextSeq - 1))).not.toBeNull();
    await expectRejected(job, 'replayed');
  });

  it('rejects oversized jobs (too many entries, too many bytes)', async () => {
    const one = message(50).entries[0]!;
    await expectRejected(sign(message(50, { entries: Array.from({ length: 5_001 }, () => one) })), 'oversized');
    await expectRejected({ ...sign(message(50)), padding: 'x'.repeat(5 * 1024 * 1024) }, 'oversized');
  });

  it('records no replay entry and no "heard" mark for a sender it rejected', async () => {
    expect(await b.redis.zcard(replayKey('mallory'))).toBe(0);
    expect(await b.redis.hget('qf:meta', 'heard:mallory')).toBeNull();
    // Only the two accepted crafted jobs (and a's own gossip) were ever recorded for a.
    const crafted = await b.redis.zrangebyscore(replayKey('a'), 5e15, 6e15);
    expect(crafted).toHaveLength(2);
  });
});

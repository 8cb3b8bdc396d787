// The admission-gossip rule (src/protocol/admission-gossip.ts; Lua mirror lua/includes/admission_gossip.lua, held to
// it by the differential test): a loud key's count reaches its peers at every report step, and a quiet key's pace is
// not read from one chance interval.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  admissionGossip,
  bucketAdmissionGossip,
  bucketReportTargets,
  bystander,
  decideBucket,
  epochCells,
  fastLaneTargets,
  federationParams,
  PACE_MIN_AHEAD,
  REPORT_STEP,
  type AdmissionGossip,
  type BucketState,
} from '../../src/protocol/index.ts';
import { prng } from '../support/simulation/random.ts';

describe('admission gossip', () => {
  it('a loud key is sent at each report step: what the peers last heard is always less than a step behind', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20_000 }), fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 300 }), (share, costs) => {
        const step = Math.max(1, Math.floor(REPORT_STEP * share));
        let count = 0;
        let heard = 0;
        for (const cost of costs) {
          const sent = admissionGossip({
            talks: true,
            ownBefore: count,
            ahead: count,
            lastAt: 0,
            room: share,
            share,
            cost,
            silent: 0.9,
            horizonMs: 10_000,
            now: 1,
          });
          count += cost;
          if (sent !== 'silent') heard = count;
          expect(count - heard).toBeLessThan(step);
        }
      }),
    );
  });

  it('without a budget every admission is sent', () => {
    for (let ownBefore = 0; ownBefore < 50; ownBefore++)
      expect(
        admissionGossip({
          talks: true,
          ownBefore,
          ahead: ownBefore,
          lastAt: 0,
          room: 1,
          share: 1_000,
          cost: 1,
          silent: 0,
          horizonMs: 10_000,
          now: 1,
        }),
      ).not.toBe('silent');
  });

  it('a quiet key below its watermark stays silent for close admissions until it runs ahead of its pace', () => {
    const facts = { talks: false, room: 340, share: 350, cost: 1, silent: 0.9, horizonMs: 10_000 };
    // Requests 5 ms apart while the region is less than 8 admissions ahead of its allowance's pace: no pace read.
    expect(admissionGossip({ ...facts, ownBefore: 1, ahead: 1, lastAt: 1_000, now: 1_005 })).toBe('silent');
    expect(admissionGossip({ ...facts, ownBefore: 40, ahead: 7, lastAt: 1_000, now: 1_005 })).toBe('silent');
    // 8 ahead, 5 ms apart means 340 in 1.7 s, within H: the peers hear of it now.
    expect(admissionGossip({ ...facts, ownBefore: 8, ahead: 8, lastAt: 1_000, now: 1_005 })).toBe('fast');
    // A slow pace stays silent.
    expect(admissionGossip({ ...facts, ownBefore: 8, ahead: 8, lastAt: 1_000, now: 2_000 })).toBe('silent');
  });

  // The spec's token bucket (decideBucket) under Poisson arrivals: one region of three, 1,000/min, 5% budget, H 10 s.
  const bucketParams = federationParams({
    regions: 3,
    self: 0,
    weights: [1, 1, 1],
    limit: 1_000,
    periodMs: 60_000,
    leakageBudget: '5%',
    maxClockSkewMs: 1_000,
  });
  const epochStart = 1_800_000_000_000 - (1_800_000_000_000 % 60_000);
  /** The gossip of each admission of one key over one epoch, requests `gapMs()` apart from the epoch's start. */
  function epochGossip(gapMs: () => number): AdmissionGossip[] {
    const sent: AdmissionGossip[] = [];
    let state: BucketState | undefined;
    for (let now = epochStart + gapMs(); now < epochStart + 60_000; now += gapMs()) {
      const gossip = bucketAdmissionGossip(bucketParams, state, 0, now, 1, 10_000);
      const decision = decideBucket(bucketParams, state, 0, now, 1);
      if (decision.allowed) sent.push(gossip);
      state = decision.state;
    }
    return sent;
  }

  it("chance pairs of a token bucket key below its share's rate never turn it loud", () => {
    // 1 request/s on average (the region's share refills about 5.8/s): exponential gaps, some a few ms.
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const random = prng(seed);
        const sent = epochGossip(() => Math.max(1, Math.round(-Math.log(1 - random()) * 1_000)));
        expect(sent.length).toBeGreaterThan(20);
        expect(sent.every((gossip) => gossip === 'silent')).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('a burst turns a token bucket key loud within a few admissions of running ahead of its pace', () => {
    // 1,000 requests/s: the region's share (about 350) would last 0.35 s, well within H.
    const sent = epochGossip(() => 1);
    const firstLoud = sent.findIndex((gossip) => gossip !== 'silent');
    expect(firstLoud).toBeGreaterThanOrEqual(PACE_MIN_AHEAD);
    expect(firstLoud).toBeLessThanOrEqual(PACE_MIN_AHEAD + 1);
    expect(sent[firstLoud]).toBe('fast');
  });

  it('the fast lane sends demand to every peer and a grant only to its receivers', () => {
    const gave = (to: Record<number, number>) => (d: number) => to[d] ?? 0;
    // Region 1 of four admitted in the slot (or was falsely denied there: its time only): every peer.
    expect(fastLaneTargets(3, 1_000, gave({ 0: 40 }), 1, 4)).toBe('all');
    expect(fastLaneTargets(0, 1_000, gave({ 0: 40 }), 1, 4)).toBe('all');
    // A donor that admitted nothing there: the peers it gave to, in index order.
    expect(fastLaneTargets(0, 0, gave({ 3: 5, 0: 40 }), 1, 4)).toEqual([0, 3]);
    // Nothing to tell apart (no grant in the newest slot): every peer, as before.
    expect(fastLaneTargets(0, 0, gave({}), 1, 4)).toBe('all');
  });

  it("a token bucket's round report skips the bystanders: idle donors that gave the region their whole share", () => {
    const params = bucketParams;
    const now = 1_800_000_030_000;
    const epoch = Math.floor(now / params.periodMs);
    /** Region 0's bucket after one admission at `now`, with `edit` applied to the epoch's cells. */
    const bucket = (edit: (cells: ReturnType<typeof epochCells>) => void, id = epoch): BucketState => {
      const state = decideBucket(params, undefined, 0, now, 1).state!;
      const cells = state.slots.find((slot) => slot.id === epoch)!;
      if (id !== epoch) cells.id = id;
      edit(cells);
      return state;
    };
    const [, u1, u2] = params.units as [number, number, number];
    // Both peers handed region 0 their whole share and admitted nothing: no round report goes anywhere.
    expect(
      bucketReportTargets(
        params,
        bucket((c) => ((c.x[1]![0] = u1), (c.x[2]![0] = u2))),
        now,
      ),
    ).toEqual([]);
    // A donor that admitted in the epoch (on its budget) hears the reports.
    expect(
      bucketReportTargets(
        params,
        bucket((c) => ((c.x[1]![0] = u1), (c.x[2]![0] = u2), (c.c[2] = 1))),
        now,
      ),
    ).toEqual([2]);
    // A donor that kept part of its share may give again: it hears them.
    expect(
      bucketReportTargets(
        params,
        bucket((c) => ((c.x[1]![0] = u1 - 1), (c.x[2]![0] = u2))),
        now,
      ),
    ).toEqual([1]);
    // Region 0 gave some back to region 1 (a return): region 1 holds share again.
    expect(
      bucketReportTargets(
        params,
        bucket((c) => ((c.x[1]![0] = u1), (c.x[2]![0] = u2), (c.x[0]![1] = 5))),
        now,
      ),
    ).toEqual([1]);
    // Gifts of the epoch before do not count: a new epoch gives every donor its share back.
    expect(
      bucketReportTargets(
        params,
        bucket((c) => ((c.x[1]![0] = u1), (c.x[2]![0] = u2)), epoch - 1),
        now,
      ),
    ).toEqual([1, 2]);
    // Nobody gave anything: every peer, as before.
    expect(
      bucketReportTargets(
        params,
        bucket(() => undefined),
        now,
      ),
    ).toEqual([1, 2]);
    expect(bystander(epochCells(bucket(() => undefined).slots, epoch), params.units, 0, 1)).toBe(false);
  });
});

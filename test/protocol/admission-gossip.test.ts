// The admission-gossip rule (src/protocol/admission-gossip.ts; Lua mirror lua/includes/admission_gossip.lua, held to
// it by the differential test): a loud key's count reaches its peers at every report step, and a quiet key's pace is
// not read from one chance interval.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admissionGossip, fastLaneTargets, REPORT_STEP } from '../../src/protocol/index.ts';

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
        admissionGossip({ talks: true, ownBefore, lastAt: 0, room: 1, share: 1_000, cost: 1, silent: 0, horizonMs: 10_000, now: 1 }),
      ).not.toBe('silent');
  });

  it('a quiet key below its watermark stays silent for two close admissions, and a steady fast pace turns it loud', () => {
    const facts = { talks: false, room: 340, share: 350, cost: 1, silent: 0.9, horizonMs: 10_000 };
    // Two requests 5 ms apart: one interval is no pace.
    expect(admissionGossip({ ...facts, ownBefore: 1, lastAt: 1_000, now: 1_005 })).toBe('silent');
    expect(admissionGossip({ ...facts, ownBefore: 2, lastAt: 1_000, now: 1_005 })).toBe('silent');
    // From the third admission on, 5 ms apart means 340 in 1.7 s, within H: the peers hear of it now.
    expect(admissionGossip({ ...facts, ownBefore: 3, lastAt: 1_000, now: 1_005 })).toBe('fast');
    // A slow pace stays silent.
    expect(admissionGossip({ ...facts, ownBefore: 3, lastAt: 1_000, now: 2_000 })).toBe('silent');
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
});

// A policy reload reaches the federation: gossip for a rule added by the reload is applied by the peer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RegionService } from '../../src/service.ts';
import { client, useRedis } from '../harness/redis.ts';
import { startPairFromFiles, writePairConfig, type PairRegion } from '../support/region-pair-files.ts';
import { eventually } from '../support/wait.ts';

const east = await useRedis();
const west = await useRedis();
const westClient = client(west.url);
const dir = mkdtempSync(join(tmpdir(), 'quotafed-reload-fed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base = { name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1h' };
const added = { name: 'added', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1h' };

const write = (region: PairRegion, rules: unknown[]) => writePairConfig(dir, region, { 'us-east': east.url, 'eu-west': west.url }, rules);

describe('policy reload in a federation', () => {
  it('applies peers’ gossip for a rule the reload added', async () => {
    const paths = { east: write('us-east', [base]), west: write('eu-west', [base]) };
    const services: RegionService[] = [];
    try {
      await startPairFromFiles(paths, services);
      write('us-east', [base, added]);
      write('eu-west', [base, added]);
      for (const service of services) expect((await service.reloadPolicy()).ok).toBe(true);

      // One admission of cost 50 crosses the watermark of this region's share (52 of 100 + 5): the key turns
      // loud and is gossiped (a small admission far below the share is silent: src/protocol/admission-gossip.ts).
      const check = await fetch(`${services[0]!.url}/v1/check`, {
        method: 'POST',
        body: JSON.stringify({ apiKey: 'k', method: 'GET', path: '/', cost: 50 }),
      });
      expect(((await check.json()) as { allowed: boolean }).allowed).toBe(true);
      // The new rule's state reaches eu-west's Redis: its gossip worker knows the rule after the reload.
      await eventually(async () => (await westClient.keys('qf:*:added:*')).length > 0, 10_000, "the added rule's state in eu-west's Redis");
    } finally {
      await Promise.all(services.map((service) => service.close()));
    }
  });
});

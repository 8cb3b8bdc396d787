// The region-removed fault's mechanics on a real lab (three redis-servers, Toxiproxy links, three service
// processes): ap-south's service is stopped for good, us-east and eu-west are restarted on the two-region peer list,
// and each fences its current windows at start-up because its recorded topology fingerprint changed
// (docs/operations.md §6a); afterwards the two agree on the new topology and ap-south answers nothing.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runFaults } from '../../chaos/faults.ts';
import { startLab, type Lab } from '../../chaos/lab/federation.ts';
import { DEFAULT_POLICY, type ChaosFault } from '../../chaos/types.ts';
import { META_KEY } from '../../src/keys.ts';

const root = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const scratch = mkdtempSync(join(tmpdir(), 'quotafed-chaos-removed-'));
let lab: Lab;

async function ready(url: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1_000) }).then(
      async (response) => {
        await response.body?.cancel();
        return response.ok;
      },
      () => false,
    );
    if (ok) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

describe('chaos lab: a region removed from the federation', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    lab = await startLab({ root, toxiproxyUrl: process.env.TOXIPROXY_URL });
    await lab.resetState();
    await lab.startServices({
      syncIntervalMs: 100,
      leakageBudget: '5%',
      policy: DEFAULT_POLICY,
      failOpen: false,
      dir: scratch,
    });
  }, 90_000);
  afterAll(async () => {
    await lab?.close();
    rmSync(scratch, { recursive: true, force: true });
  }, 30_000);

  it('stops it for good, restarts the others on the new peer list, and each fences on the changed fingerprint', async () => {
    const threeRegions = await lab.direct['us-east'].hget(META_KEY, 'fingerprint');
    expect(threeRegions).not.toBeNull();
    const fault: ChaosFault = { kind: 'regionRemoved', region: 'ap-south', at: 0 };
    const notes: string[] = [];
    const errors: Error[] = [];
    await runFaults(lab, [fault], performance.now(), {
      onNote: (_fault, note) => notes.push(note),
      onError: (_fault, error) => errors.push(error),
    });
    expect(errors).toEqual([]);

    expect(lab.members()).toEqual(['us-east', 'eu-west']);
    const stopped = await fetch(`${lab.serviceUrl('ap-south')}/healthz`, { signal: AbortSignal.timeout(1_000) }).then(
      () => 'answered',
      () => 'refused',
    );
    expect(stopped).toBe('refused');

    for (const [region, peer] of [
      ['us-east', 'eu-west'],
      ['eu-west', 'us-east'],
    ] as const) {
      const config = parse(readFileSync(join(scratch, `${region}.yaml`), 'utf8')) as { federation: { peers: Array<{ name: string }> } };
      expect(config.federation.peers.map((p) => p.name)).toEqual([peer]);
      const [fingerprint, fence] = await lab.direct[region].hmget(META_KEY, 'fingerprint', 'fence');
      expect(fingerprint).not.toBe(threeRegions);
      expect(Number(fence)).toBeGreaterThan(0);
      const fenced = notes.find((note) => note.startsWith(`${region} restarted with peers [${peer}]`));
      expect(fenced, notes.join('\n')).toContain('log federation.fenced: "regions or weights changed"');
    }
    expect(notes.some((note) => note.startsWith('NOT FENCED'))).toBe(false);
    // Both on the same two-region topology: neither rejects the other any more.
    expect(await lab.direct['us-east'].hget(META_KEY, 'fingerprint')).toBe(await lab.direct['eu-west'].hget(META_KEY, 'fingerprint'));
    expect(await ready(lab.serviceUrl('us-east'), 15_000)).toBe(true);
    expect(await ready(lab.serviceUrl('eu-west'), 15_000)).toBe(true);
  });
});

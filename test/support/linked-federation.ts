// `npm start`'s local federation (src/ops/local-federation.ts: a redis-server per region, the demo upstream,
// three `quotafed serve` processes with regions/*.yaml) on free ports, returned once it is linked and healthy:
// every region ready (Redis up, breaker closed) and every region's Redis records gossip (a heartbeat at least)
// applied from each of its peers (qf:meta heard:<peer>). A timeout says why, with the services' last lines.
import { Redis } from 'ioredis';
import { META_KEY } from '../../src/keys.ts';
import { startLocalFederation, type LocalFederation } from '../../src/ops/local-federation.ts';
import { freePort } from '../../src/ops/redis-process.ts';
import { eventually } from './wait.ts';

export async function startLinkedFederation(root: string, output: string[] = []): Promise<LocalFederation> {
  const ports = (n: number) => Promise.all(Array.from({ length: n }, () => freePort()));
  const federation = await startLocalFederation({
    root,
    redisPorts: await ports(3),
    servicePorts: await ports(3),
    upstreamPort: await freePort(),
    output: (line) => output.push(line),
    serviceReadyTimeoutMs: 60_000,
  });
  const waitFor = (what: string, check: () => Promise<boolean>) =>
    eventually(check, 30_000, what, 100).catch((error: Error) => {
      throw new Error(`${error.message}:\n${output.slice(-20).join('\n')}`);
    });
  try {
    await untilLinked(federation, waitFor);
  } catch (error) {
    // The caller never gets the federation to stop: stop it here, or its processes outlive the test run.
    await federation.stop().catch(() => undefined);
    throw error;
  }
  return federation;
}

/** Every region ready and every region's Redis has applied gossip from each of its peers. */
async function untilLinked(
  federation: LocalFederation,
  waitFor: (what: string, check: () => Promise<boolean>) => Promise<unknown>,
): Promise<void> {
  const names = federation.regions.map((region) => region.name);
  for (const region of federation.regions) {
    await waitFor(`${region.name} not ready`, async () => {
      try {
        const response = await fetch(`${region.url}/readyz`);
        await response.body?.cancel();
        return response.ok;
      } catch {
        return false;
      }
    });
    const redis = new Redis(region.redisUrl, { maxRetriesPerRequest: 1 });
    try {
      for (const peer of names.filter((name) => name !== region.name)) {
        await waitFor(`${region.name} never heard from ${peer}`, async () => (await redis.hget(META_KEY, `heard:${peer}`)) !== null);
      }
    } finally {
      redis.disconnect();
    }
  }
}

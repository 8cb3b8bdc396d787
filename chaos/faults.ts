// Turns a scenario's faults into actions on the lab at their offsets: links cut and restored through
// Toxiproxy, latency toxics, redis-server and service processes killed and restarted.
import { META_KEY } from '../src/keys.ts';
import { waitReady } from '../src/store/client.ts';
import { RUN_ID_FIELD } from '../src/federation/recovery.ts';
import type { Lab } from './lab/federation.ts';
import type { Link } from './lab/network.ts';
import { REGIONS, type ChaosFault, type RegionName } from './types.ts';

export interface FaultEvents {
  /** A fault began (`at`) or healed (`until`); `t` is ms after the run start. */
  onStart?: (fault: ChaosFault, t: number) => void;
  onHeal?: (fault: ChaosFault, t: number) => void;
  onError?: (fault: ChaosFault, error: Error) => void;
  /** Something the fault observed that belongs in the run's notes (e.g. whether a restart was detected). */
  onNote?: (fault: ChaosFault, note: string) => void;
}

/** How long after a snapshot restart the region's service has to fence before the run notes it did not. */
const DETECTION_TIMEOUT_MS = 5_000;

export function describeFault(fault: ChaosFault): string {
  const span = `${fault.at / 1000}–${fault.until / 1000} s`;
  switch (fault.kind) {
    case 'latency':
      return `latency ${fault.latencyMs}±${fault.jitterMs} ms on every link, ${span}`;
    case 'partition':
      return `${fault.region} partitioned, ${span}`;
    case 'oneWay':
      return `${fault.region} → peers cut (one way), ${span}`;
    case 'flap':
      return `${fault.from} ↔ ${fault.to} flapping every ${fault.everyMs} ms, ${span}`;
    case 'redisDown':
      return `${fault.region} redis-server killed, ${span}`;
    case 'serviceDown':
      return `${fault.region} service killed, ${span}`;
    case 'redisStall':
      return `${fault.region} redis-server stopped (SIGSTOP), ${span}`;
    case 'ruleReload':
      return (
        `${fault.region} reloads its rules to window ${fault.policy.windowLimit}/${fault.policy.windowPeriodMs / 1000} s, bucket ` +
        `${fault.policy.bucketLimit}/${fault.policy.bucketPeriodMs / 1000} s (capacity ${fault.policy.bucketBurst}), ${span}`
      );
    case 'redisSnapshotRestart':
      return `${fault.region} redis-server snapshot (BGSAVE) at ${fault.snapshotAt / 1000} s, killed and restarted from it, ${span}`;
  }
}

/** The links a fault cuts, both directions unless one-way. */
export function cutLinks(fault: ChaosFault): Link[] {
  const others = (region: RegionName) => REGIONS.filter((r) => r !== region);
  switch (fault.kind) {
    case 'partition':
      return others(fault.region).flatMap((peer) => [
        { from: fault.region, to: peer },
        { from: peer, to: fault.region },
      ]);
    case 'oneWay':
      return others(fault.region).map((peer) => ({ from: fault.region, to: peer }));
    case 'flap':
      return [
        { from: fault.from, to: fault.to },
        { from: fault.to, to: fault.from },
      ];
    default:
      return [];
  }
}

const sleepUntil = (startPerf: number, offset: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, startPerf + offset - performance.now())));

async function setLinks(lab: Lab, links: readonly Link[], enabled: boolean): Promise<void> {
  await Promise.all(links.map((link) => lab.network.setEnabled(link, enabled)));
}

async function runFault(lab: Lab, fault: ChaosFault, index: number, startPerf: number, events: FaultEvents): Promise<void> {
  const elapsed = () => performance.now() - startPerf;
  // A restart's detection is watched after the heal (the heal is when Redis is back, not when it was noticed).
  let detection: Promise<void> | undefined;
  if (fault.kind === 'redisSnapshotRestart') {
    // Before the fault proper: the region keeps admitting after the snapshot, and those admissions are what
    // the restart loses.
    await sleepUntil(startPerf, fault.snapshotAt);
    await lab.snapshotRedis(fault.region);
    events.onNote?.(fault, `${fault.region}'s Redis snapshot (BGSAVE) finished at ${(elapsed() / 1000).toFixed(2)} s`);
  }
  await sleepUntil(startPerf, fault.at);
  events.onStart?.(fault, elapsed());
  switch (fault.kind) {
    case 'latency': {
      const name = `chaos-latency-${index}`;
      await Promise.all(lab.network.links().map((link) => lab.network.addLatency(link, fault.latencyMs, fault.jitterMs, name)));
      await sleepUntil(startPerf, fault.until);
      await Promise.all(lab.network.links().map((link) => lab.network.removeToxic(link, name)));
      break;
    }
    case 'partition':
    case 'oneWay':
      await setLinks(lab, cutLinks(fault), false);
      await sleepUntil(startPerf, fault.until);
      await setLinks(lab, cutLinks(fault), true);
      break;
    case 'flap': {
      let up = false;
      await setLinks(lab, cutLinks(fault), false);
      // Bounded: one toggle per period until the heal.
      const toggles = Math.floor((fault.until - fault.at) / fault.everyMs);
      for (let i = 1; i < toggles; i++) {
        await sleepUntil(startPerf, fault.at + i * fault.everyMs);
        up = !up;
        await setLinks(lab, cutLinks(fault), up);
      }
      await sleepUntil(startPerf, fault.until);
      await setLinks(lab, cutLinks(fault), true);
      break;
    }
    case 'redisDown':
      await lab.killRedis(fault.region);
      await sleepUntil(startPerf, fault.until);
      await lab.restartRedis(fault.region);
      break;
    case 'serviceDown':
      await lab.killService(fault.region);
      await sleepUntil(startPerf, fault.until);
      await lab.restartService(fault.region);
      break;
    case 'redisStall':
      lab.stallRedis(fault.region);
      await sleepUntil(startPerf, fault.until);
      lab.resumeRedis(fault.region);
      break;
    case 'ruleReload': {
      const original = lab.runPolicy();
      await lab.reloadPolicy(fault.region, fault.policy);
      events.onNote?.(fault, `${fault.region} took the reload at ${(elapsed() / 1000).toFixed(2)} s`);
      await sleepUntil(startPerf, fault.until);
      await lab.reloadPolicy(fault.region, original);
      break;
    }
    case 'redisSnapshotRestart':
      ({ detection } = await restartFromSnapshot(lab, fault, startPerf, events));
      break;
  }
  events.onHeal?.(fault, elapsed());
  await detection;
}

/**
 * Waits until the region's service has fenced on the restarted Redis: qf:meta records the new process's run_id
 * with a fence (recovery.ts, survivedStateDoubt). Resolves with the fence (ms, Redis TIME), or null on timeout.
 */
async function awaitFence(lab: Lab, region: RegionName, runId: string, timeoutMs: number): Promise<number | null> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const [recorded, fence] = await lab.direct[region].hmget(META_KEY, RUN_ID_FIELD, 'fence').catch(() => [null, null]);
    if (recorded === runId && Number(fence ?? 0) > 0) return Number(fence);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return null;
}

/**
 * Kills the region's Redis at `at` and restarts it from the snapshot at `until` (runFault took the snapshot at
 * `snapshotAt`). Resolves once Redis is back, with the watch for the service's fence still running: it notes how
 * long the region took to fence on the new run_id, or that it did not.
 */
async function restartFromSnapshot(
  lab: Lab,
  fault: Extract<ChaosFault, { kind: 'redisSnapshotRestart' }>,
  startPerf: number,
  events: FaultEvents,
): Promise<{ detection: Promise<void> }> {
  const note = (text: string) => events.onNote?.(fault, text);
  const before = await lab.redisRunId(fault.region);
  await lab.killRedis(fault.region);
  await sleepUntil(startPerf, fault.until);
  await lab.restartRedis(fault.region);
  const restartedAt = performance.now();
  const detection = (async () => {
    await waitReady(lab.direct[fault.region], DETECTION_TIMEOUT_MS);
    const after = await lab.redisRunId(fault.region);
    const fence = await awaitFence(lab, fault.region, after, DETECTION_TIMEOUT_MS);
    const ids = `run_id ${before.slice(0, 8)}… → ${after.slice(0, 8)}…`;
    note(
      fence === null
        ? `NOT DETECTED: ${fault.region} did not fence within ${DETECTION_TIMEOUT_MS / 1000} s of its Redis restarting from the snapshot (${ids})`
        : `${fault.region} detected the restart from the snapshot (${ids}) and fenced ${Math.round(performance.now() - restartedAt)} ms ` +
            `after its Redis came back (at ${((restartedAt - startPerf) / 1000).toFixed(2)} s; fence ${new Date(fence).toISOString()})`,
    );
  })();
  return { detection };
}

/** Runs every fault on its own timeline; resolves when all have healed. */
export async function runFaults(lab: Lab, faults: readonly ChaosFault[], startPerf: number, events: FaultEvents = {}): Promise<void> {
  await Promise.all(
    faults.map((fault, index) =>
      runFault(lab, fault, index, startPerf, events).catch((error: unknown) => {
        events.onError?.(fault, error as Error);
      }),
    ),
  );
}

// Turns a scenario's faults into actions on the lab at their offsets: links cut and restored through
// Toxiproxy, latency toxics, redis-server and service processes killed and restarted, a region removed from
// the federation (docs/operations.md §6a).
import { META_KEY } from '../src/keys.ts';
import { waitReady } from '../src/store/client.ts';
import { RUN_ID_FIELD } from '../src/federation/recovery.ts';
import { REMOVAL_GRACE_MS, type Lab } from './lab/federation.ts';
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

/** How long a region restarted with the new peer list has, once it answers, to record its fence. */
const FENCE_TIMEOUT_MS = 5_000;

/** What the start-up fence of a topology change says in `federation.fenced` (recovery.ts survivedStateDoubt). */
const TOPOLOGY_FENCE_REASON = 'regions or weights changed';

export function describeFault(fault: ChaosFault): string {
  const span = 'until' in fault ? `${fault.at / 1000}–${fault.until / 1000} s` : `from ${fault.at / 1000} s`;
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
    case 'regionRemoved':
      return `${fault.region} removed from the federation (service stopped for good, the others restarted without it), ${span}`;
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
    case 'regionRemoved':
      await removeRegion(lab, fault, startPerf, events);
      break;
  }
  events.onHeal?.(fault, elapsed());
  await detection;
}

/** What a region's qf:meta records of its last start (recovery.ts markStarted). */
interface StartRecord {
  runId: string | null;
  fingerprint: string | null;
  /** ms (Redis TIME), 0 when the start fenced nothing. */
  fence: number;
}

async function readStartRecord(lab: Lab, region: RegionName): Promise<StartRecord> {
  const [runId, fingerprint, fence] = await lab.direct[region]
    .hmget(META_KEY, RUN_ID_FIELD, 'fingerprint', 'fence')
    .catch(() => [null, null, null]);
  return { runId: runId ?? null, fingerprint: fingerprint ?? null, fence: Number(fence ?? 0) };
}

/**
 * Waits until the region's service has recorded a fence its qf:meta start record satisfies `fenced` with
 * (recovery.ts, survivedStateDoubt). Resolves with the record, or null on timeout.
 */
async function awaitFence(
  lab: Lab,
  region: RegionName,
  fenced: (record: StartRecord) => boolean,
  timeoutMs: number,
): Promise<StartRecord | null> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const record = await readStartRecord(lab, region);
    if (record.fence > 0 && fenced(record)) return record;
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
    const fence = (await awaitFence(lab, fault.region, (record) => record.runId === after, DETECTION_TIMEOUT_MS))?.fence ?? null;
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

/** The reason of the `federation.fenced` line among a service's output lines (pino JSON), if it wrote one. */
export function fencedReason(lines: readonly string[]): string | undefined {
  for (const line of lines) {
    if (!line.includes('federation.fenced')) continue;
    try {
      const entry = JSON.parse(line) as { event?: string; reason?: unknown };
      if (entry.event === 'federation.fenced' && typeof entry.reason === 'string') return entry.reason;
    } catch {
      // not a JSON line
    }
  }
  return undefined;
}

/**
 * docs/operations.md §6a, remove: stops the region's service for good at `at`, then restarts every remaining region
 * on the peer list without it, one after the other (the others keep serving meanwhile). Notes, per remaining
 * region, when it was down and when it fenced on the changed topology fingerprint, with its log's reason (or
 * NOT FENCED).
 */
async function removeRegion(
  lab: Lab,
  fault: Extract<ChaosFault, { kind: 'regionRemoved' }>,
  startPerf: number,
  events: FaultEvents,
): Promise<void> {
  const note = (text: string) => events.onNote?.(fault, text);
  const seconds = (perf: number) => `${((perf - startPerf) / 1000).toFixed(2)} s`;
  const stopMs = await lab.removeRegion(fault.region);
  note(
    `${fault.region}'s service stopped for good at ${seconds(performance.now())} (SIGTERM at ${seconds(performance.now() - stopMs)}; ` +
      (stopMs >= REMOVAL_GRACE_MS - 50
        ? `it did not exit within the ${REMOVAL_GRACE_MS / 1000} s grace and was SIGKILLed)`
        : `it shut down in ${(stopMs / 1000).toFixed(2)} s)`),
  );
  for (const region of lab.members()) {
    const before = await readStartRecord(lab, region);
    const down = performance.now();
    await lab.restartWithMembers(region);
    const up = performance.now();
    const record = await awaitFence(
      lab,
      region,
      (now) => now.fingerprint !== null && now.fingerprint !== before.fingerprint,
      FENCE_TIMEOUT_MS,
    );
    const peers = lab.members().filter((member) => member !== region);
    const restart = `${region} restarted with peers [${peers.join(', ')}] (down ${seconds(down)}–${seconds(up)})`;
    if (record === null) {
      note(
        `NOT FENCED: ${restart}, but recorded no fence on a new topology fingerprint within ${FENCE_TIMEOUT_MS / 1000} s ` +
          `(fingerprint ${before.fingerprint ?? 'none'})`,
      );
      continue;
    }
    const reason = fencedReason(lab.serviceOutput(region));
    const logged =
      reason === undefined
        ? 'no federation.fenced line in its log'
        : reason.includes(TOPOLOGY_FENCE_REASON)
          ? `log federation.fenced: "${TOPOLOGY_FENCE_REASON}"`
          : `log federation.fenced with another reason: "${reason}"`;
    note(
      `${restart} and fenced at ${seconds(record.fence - performance.timeOrigin)} (${new Date(record.fence).toISOString()}; fingerprint ${before.fingerprint ?? 'none'} → ` +
        `${record.fingerprint}; ${logged})`,
    );
  }
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

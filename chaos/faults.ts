// Turns a scenario's faults into actions on the lab at their offsets: links cut and restored through
// Toxiproxy, latency toxics, redis-server and service processes killed and restarted.
import type { Lab } from './lab/federation.ts';
import type { Link } from './lab/network.ts';
import { REGIONS, type ChaosFault, type RegionName } from './types.ts';

export interface FaultEvents {
  /** A fault began (`at`) or healed (`until`); `t` is ms after the run start. */
  onStart?: (fault: ChaosFault, t: number) => void;
  onHeal?: (fault: ChaosFault, t: number) => void;
  onError?: (fault: ChaosFault, error: Error) => void;
}

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
  }
  events.onHeal?.(fault, elapsed());
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

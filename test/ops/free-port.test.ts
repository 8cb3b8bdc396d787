// freePort hands out loopback ports below the kernel's ephemeral range (an outgoing connection cannot take them
// between the pick and the bind), each one once per process, and each free when handed out.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { freePort, portIsFree } from '../../src/ops/redis-process.ts';

describe('freePort', () => {
  it('gives distinct free ports below the ephemeral range', async () => {
    const rangeStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const ports = await Promise.all(Array.from({ length: 40 }, () => freePort()));
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) {
      expect(port).toBeLessThan(rangeStart);
      expect(port).toBeGreaterThanOrEqual(1_024);
      expect(await portIsFree(port)).toBe(true);
    }
  });

  it('gives a cluster node a port whose bus (10,000 above) is below the ephemeral range and free too', async () => {
    const rangeStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort({ clusterBus: true })));
    const taken = ports.flatMap((port) => [port, port + 10_000]);
    expect(new Set(taken).size).toBe(taken.length);
    for (const port of ports) {
      expect(port + 10_000).toBeLessThan(rangeStart);
      expect(await portIsFree(port)).toBe(true);
      expect(await portIsFree(port + 10_000)).toBe(true);
    }
  });
});

// The client IP behind proxies, over real HTTP: a hop count or a trusted-proxy list (proxy-addr) picks the
// client out of X-Forwarded-For or RFC 7239 Forwarded, and IPv6 clients are keyed by their /64 (configurable).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forwardedFor, ipKey } from '../../src/http/identity.ts';
import { startRegionService, type RegionService } from '../../src/service.ts';
import { seedConfig, startUpstream, type Upstream } from '../service/fixtures.ts';
import { useRedis } from '../harness/redis.ts';

describe('forwardedFor (RFC 7239)', () => {
  it('reads every for= node, without quotes, brackets or ports', () => {
    expect(forwardedFor('for=192.0.2.60;proto=http;by=203.0.113.43')).toEqual(['192.0.2.60']);
    expect(forwardedFor('For="[2001:db8:cafe::17]:4711", for=198.51.100.17;by=x, FOR="192.0.2.43:47011"')).toEqual([
      '2001:db8:cafe::17',
      '198.51.100.17',
      '192.0.2.43',
    ]);
    expect(forwardedFor('for=unknown, for=_hidden, proto=https')).toEqual(['unknown', '_hidden']);
  });
});

describe('ipKey', () => {
  it('cuts IPv6 addresses to the prefix and leaves IPv4 alone', () => {
    expect(ipKey('2001:db8:aa:bb:1:2:3:4', 64)).toBe('2001:db8:aa:bb::/64');
    expect(ipKey('2001:db8:aa:bb::ffff', 64)).toBe('2001:db8:aa:bb::/64');
    expect(ipKey('2001:db8:aa:bb:1:2:3:4', 56)).toBe('2001:db8:aa::/56');
    expect(ipKey('2001:db8:aa:bbff::1', 52)).toBe('2001:db8:aa:b000::/52');
    expect(ipKey('::1', 64)).toBe('::/64');
    expect(ipKey('2001:db8::1', 128)).toBe('2001:db8::1');
    expect(ipKey('198.51.100.7', 64)).toBe('198.51.100.7');
  });
});

describe('client IP through the service', async () => {
  const redis = await useRedis();
  const services: RegionService[] = [];
  let upstream: Upstream;
  const start = async (region: string, identity: Record<string, unknown>, gateway = false) => {
    const service = await startRegionService(
      seedConfig(redis.url, (raw) => {
        raw.region = region;
        raw.identity = identity;
        if (gateway) raw.upstream = { url: upstream.url };
        raw.rules = [
          { name: `anon-${region}`, match: { identity: 'anonymous' }, by: ['ip'], algorithm: 'fixedWindow', limit: 1, period: '1h' },
        ];
      }),
    );
    services.push(service);
    return service;
  };
  beforeAll(async () => {
    upstream = await startUpstream();
  });
  afterAll(async () => {
    await Promise.all(services.map((service) => service.close()));
    await upstream?.close();
  });

  /** Whether an anonymous request with these headers is admitted (limit 1 per client IP). */
  const admitted = async (service: RegionService, headers: Record<string, string>) => {
    const response = await fetch(`${service.url}/v1/check`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ method: 'GET', path: '/x' }),
    });
    return ((await response.json()) as { allowed: boolean }).allowed;
  };
  const xff = (value: string) => ({ 'X-Forwarded-For': value });

  it('behind a CDN and a load balancer (hops: 2), each client has its own bucket; one hop would share one', async () => {
    const twoHops = await start('hops', { clientIp: { hops: 2 } });
    expect(await admitted(twoHops, xff('198.51.100.1, 203.0.113.50'))).toBe(true);
    expect(await admitted(twoHops, xff('198.51.100.2, 203.0.113.50'))).toBe(true); // same CDN edge, other client
    expect(await admitted(twoHops, xff('198.51.100.1, 203.0.113.50'))).toBe(false);
    // A client that prepends its own entries is still itself.
    expect(await admitted(twoHops, xff('6.6.6.6, 198.51.100.2, 203.0.113.50'))).toBe(false);

    // The right-most entry alone (trustForwardedFor, one hop): every client of that CDN edge is one bucket.
    const oneHop = await start('one-hop', { trustForwardedFor: true });
    expect(await admitted(oneHop, xff('198.51.100.1, 203.0.113.50'))).toBe(true);
    expect(await admitted(oneHop, xff('198.51.100.2, 203.0.113.50'))).toBe(false);
  });

  it('with a trusted-proxy list, walks past trusted proxies to the first address that is not one', async () => {
    const listed = await start('listed', { clientIp: { trustedProxies: ['loopback', '203.0.113.0/24'] } });
    expect(await admitted(listed, xff('198.51.100.7, 203.0.113.9'))).toBe(true);
    expect(await admitted(listed, xff('198.51.100.7, 203.0.113.10'))).toBe(false); // another trusted edge, same client
    // 192.0.2.66 is not a trusted proxy: it is the client, whatever it claims to the left.
    expect(await admitted(listed, xff('198.51.100.8, 192.0.2.66'))).toBe(true);
    expect(await admitted(listed, xff('198.51.100.9, 192.0.2.66'))).toBe(false);

    // The socket's peer (127.0.0.1) is not in this list: the header is not believed at all.
    const notLoopback = await start('not-loopback', { clientIp: { trustedProxies: ['10.0.0.0/8'] } });
    expect(await admitted(notLoopback, xff('198.51.100.10'))).toBe(true);
    expect(await admitted(notLoopback, xff('198.51.100.11'))).toBe(false); // both are 127.0.0.1
  });

  it('reads RFC 7239 Forwarded when configured', async () => {
    const forwarded = await start('forwarded', { clientIp: { hops: 2, header: 'forwarded' } });
    expect(await admitted(forwarded, { Forwarded: 'for=198.51.100.30;proto=https, for="203.0.113.5:443"' })).toBe(true);
    expect(await admitted(forwarded, { Forwarded: 'for=198.51.100.31, for=203.0.113.5' })).toBe(true);
    expect(await admitted(forwarded, { Forwarded: 'for=198.51.100.30, for=203.0.113.6' })).toBe(false);
    // X-Forwarded-For is not read then.
    expect(await admitted(forwarded, xff('198.51.100.32, 203.0.113.5'))).toBe(true);
    expect(await admitted(forwarded, xff('198.51.100.33, 203.0.113.5'))).toBe(false); // both 127.0.0.1
  });

  it('keys IPv6 clients by their /64 by default, by the configured prefix otherwise', async () => {
    const v6 = await start('ipv6', { clientIp: { hops: 1 } });
    expect(await admitted(v6, xff('2001:db8:aa:bb::1'))).toBe(true);
    expect(await admitted(v6, xff('2001:db8:aa:bb:ffff:1:2:3'))).toBe(false); // same /64: rotating does not help
    expect(await admitted(v6, xff('2001:db8:aa:bc::1'))).toBe(true);

    const full = await start('ipv6-128', { clientIp: { hops: 1, ipv6Prefix: 128 } });
    expect(await admitted(full, xff('2001:db8:aa:bd::1'))).toBe(true);
    expect(await admitted(full, xff('2001:db8:aa:bd::2'))).toBe(true);
  });

  it("keys an IPv6 caller named by /v1/check's ip or nginx's X-Real-IP by its prefix too", async () => {
    const v6 = await start('ipv6-named', { clientIp: { hops: 1 } });
    const checkFor = async (ip: string) =>
      (
        (await (await fetch(`${v6.url}/v1/check`, { method: 'POST', body: JSON.stringify({ method: 'GET', path: '/', ip }) })).json()) as {
          allowed: boolean;
        }
      ).allowed;
    expect(await checkFor('2001:db8:cc:dd::1')).toBe(true);
    expect(await checkFor('2001:db8:cc:dd:9:8:7:6')).toBe(false); // same /64
    const auth = async (ip: string) =>
      (await fetch(`${v6.url}/v1/auth`, { headers: { 'X-Real-IP': ip, 'X-Original-URI': '/', 'X-Original-Method': 'GET' } })).status;
    expect(await auth('2001:db8:ee:ff::1')).toBe(204);
    expect(await auth('2001:db8:ee:ff::2')).not.toBe(204); // same /64, denied
  });

  it('the gateway forwards the chain and the full client address, not the prefix key', async () => {
    const gateway = await start('gateway', { clientIp: { hops: 2 } }, true);
    const before = upstream.seen.length;
    const response = await fetch(`${gateway.url}/page`, { headers: xff('2001:db8:1:2::9, 203.0.113.77') });
    expect(response.status).toBe(200);
    const forwarded = upstream.seen.slice(before).map((seen) => String(seen.headers['x-forwarded-for']));
    expect(forwarded).toHaveLength(1);
    expect(forwarded[0]).toMatch(/^2001:db8:1:2::9, 203\.0\.113\.77, 2001:db8:1:2::9$/);
    expect(forwarded[0]).not.toContain('/64');
  });

  it('refuses a malformed trusted proxy and hops together with a list', () => {
    expect(() => seedConfig(redis.url, (raw) => (raw.identity = { clientIp: { trustedProxies: ['not-an-ip'] } }))).toThrow(
      /identity\.clientIp\.trustedProxies\[0\]: expected an IP address, a CIDR range/,
    );
    expect(() => seedConfig(redis.url, (raw) => (raw.identity = { clientIp: { trustedProxies: ['loopback'], hops: 1 } }))).toThrow(
      /identity\.clientIp\.hops: set trustedProxies or hops, not both/,
    );
  });
});

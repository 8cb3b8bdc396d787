// Each toxic's effect on real TCP traffic through the proxy to an echo server, set up only through
// toxiproxy-node-client. Timing checks are lower bounds with margin; none asserts an upper bound.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { ICreateToxicBody, Proxy } from 'toxiproxy-node-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClient, proxyTo, sleep, startEchoServer, useToxiproxy, type EchoServer } from './helpers.ts';

const tp = useToxiproxy();
let echo: EchoServer;
let sink: EchoServer;

beforeAll(async () => {
  echo = await startEchoServer();
  sink = await startEchoServer({ silent: true });
});
afterAll(async () => {
  await echo.close();
  await sink.close();
});

type ToxicType = ICreateToxicBody<unknown>['type'];

function addToxic(
  proxy: Proxy,
  type: ToxicType,
  attributes: Record<string, number>,
  options: { stream?: 'upstream' | 'downstream'; name?: string; toxicity?: number } = {},
) {
  return proxy.addToxic({
    type,
    attributes,
    stream: options.stream ?? 'downstream',
    name: options.name ?? `${type}_${options.stream ?? 'downstream'}`,
    toxicity: options.toxicity ?? 1,
  });
}

describe('toxiproxy TCP proxying', { timeout: 10_000 }, () => {
  it('passes bytes through unchanged, including a 64 KiB message', async () => {
    const proxy = await proxyTo(tp.client, 'plain', echo.address);
    const client = await openClient(proxy.listen);
    const message = randomBytes(64 * 1024);
    await client.roundTrip(message);
    expect(client.received().equals(message)).toBe(true);
    client.socket.destroy();
  });

  it('closes the client when the upstream is down, and keeps listening', async () => {
    const proxy = await proxyTo(tp.client, 'down-upstream', '127.0.0.1:1');
    for (let i = 0; i < 2; i++) {
      const client = await openClient(proxy.listen);
      await client.closed;
      expect(client.received().length).toBe(0);
    }
  });

  it('disable closes live connections and refuses new ones; enable listens again on the same address', async () => {
    const proxy = await proxyTo(tp.client, 'toggle', echo.address);
    const client = await openClient(proxy.listen);
    await client.roundTrip('ping');
    const off = await proxy.update({ enabled: false, listen: proxy.listen, upstream: echo.address });
    await client.closed;
    await expect(openClient(proxy.listen)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    const on = await off.update({ enabled: true, listen: off.listen, upstream: echo.address });
    expect(on.listen).toBe(proxy.listen);
    const again = await openClient(on.listen);
    await again.roundTrip('pong');
    expect(again.received().toString()).toBe('pong');
    again.socket.destroy();
  });

  it('delete closes live connections', async () => {
    const proxy = await proxyTo(tp.client, 'deleted', echo.address);
    const client = await openClient(proxy.listen);
    await client.roundTrip('x');
    await proxy.remove();
    await client.closed;
  });

  it('loses and reorders nothing while toxics are added and removed on a live connection', async () => {
    const proxy = await proxyTo(tp.client, 'churn', echo.address);
    const client = await openClient(proxy.listen);
    const messages = 400;
    const expected = Buffer.from(Array.from({ length: messages }, (_, i) => `${i};`).join(''));
    let writing = true;
    const writer = (async () => {
      for (let i = 0; i < messages; i++) {
        client.socket.write(`${i};`);
        if (i % 4 === 0) await sleep(1);
      }
      writing = false;
    })();
    let rounds = 0;
    while (writing && rounds < 100) {
      const toxic = await addToxic(proxy, 'latency', { latency: 5, jitter: 0 }, { name: `l${rounds}` });
      await sleep(2);
      await toxic.remove();
      rounds += 1;
    }
    expect(rounds).toBeGreaterThanOrEqual(3);
    await writer;
    const received = await client.waitFor(expected.length);
    expect(received.toString()).toBe(expected.toString());
    client.socket.destroy();
  });
});

describe('toxics', { timeout: 10_000 }, () => {
  it('latency delays each direction and adds up along the chain', async () => {
    const proxy = await proxyTo(tp.client, 'latency', echo.address);
    const client = await openClient(proxy.listen);
    await addToxic(proxy, 'latency', { latency: 100, jitter: 0 });
    expect(await client.roundTrip('a')).toBeGreaterThanOrEqual(90);
    await addToxic(proxy, 'latency', { latency: 50, jitter: 0 }, { stream: 'upstream' });
    expect(await client.roundTrip('b')).toBeGreaterThanOrEqual(140);
    await addToxic(proxy, 'latency', { latency: 50, jitter: 10 }, { name: 'second' });
    expect(await client.roundTrip('c')).toBeGreaterThanOrEqual(180);
    client.socket.destroy();
  });

  it('latency on a new connection, and removing it releases held data at once', async () => {
    const proxy = await proxyTo(tp.client, 'held', echo.address);
    const toxic = await addToxic(proxy, 'latency', { latency: 60_000, jitter: 0 });
    const client = await openClient(proxy.listen);
    const started = performance.now();
    client.socket.write('held');
    await sleep(50);
    expect(client.received().length).toBe(0);
    await toxic.remove();
    await client.waitFor(4, 5_000);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    client.socket.destroy();
  });

  it('bandwidth limits the rate (20 KB at 100 KB/s takes about 200 ms)', async () => {
    const proxy = await proxyTo(tp.client, 'bandwidth', echo.address);
    await addToxic(proxy, 'bandwidth', { rate: 100 });
    const client = await openClient(proxy.listen);
    const message = randomBytes(20_000);
    expect(await client.roundTrip(message)).toBeGreaterThanOrEqual(170);
    expect(client.received().equals(message)).toBe(true);
    client.socket.destroy();
  });

  it('timeout drops data and closes the connection after the idle time', async () => {
    const proxy = await proxyTo(tp.client, 'timeout', echo.address);
    await addToxic(proxy, 'timeout', { timeout: 100 });
    const client = await openClient(proxy.listen);
    const started = performance.now();
    client.socket.write('dropped');
    const { at } = await client.closed;
    expect(at - started).toBeGreaterThanOrEqual(90);
    expect(client.received().length).toBe(0);
  });

  it('timeout 0 drops data forever; removing it closes both ends', async () => {
    const proxy = await proxyTo(tp.client, 'timeout0', sink.address);
    const toxic = await addToxic(proxy, 'timeout', { timeout: 0 }, { stream: 'upstream' });
    const client = await openClient(proxy.listen);
    client.socket.write('dropped');
    await sleep(150);
    expect(client.socket.destroyed).toBe(false);
    const peer = sink.peers.at(-1)!;
    expect(Buffer.concat(peer.received).length).toBe(0);
    await toxic.remove();
    await client.closed;
    await peer.closed;
  });

  it('toxicity 0 leaves connections alone; updating it to 1 applies the toxic to the live connection', async () => {
    const proxy = await proxyTo(tp.client, 'toxicity', echo.address);
    const toxic = await addToxic(proxy, 'timeout', { timeout: 0 }, { toxicity: 0 });
    const client = await openClient(proxy.listen);
    await client.roundTrip('passes');
    await toxic.update({ ...toxic.toJson(), toxicity: 1 });
    client.socket.write('dropped');
    await sleep(100);
    expect(client.received().toString()).toBe('passes');
    client.socket.destroy();
  });

  it('reset_peer resets the connection (ECONNRESET) after the timeout', async () => {
    const proxy = await proxyTo(tp.client, 'reset', sink.address);
    await addToxic(proxy, 'reset_peer', { timeout: 50 }, { stream: 'upstream' });
    const client = await openClient(proxy.listen);
    const started = performance.now();
    client.socket.write('boom');
    const closed = await client.closed;
    expect(closed.error).toBe('ECONNRESET');
    expect(closed.at - started).toBeGreaterThanOrEqual(40);
    const peer = await sink.peers.at(-1)!.closed;
    expect(peer.error).toBe('ECONNRESET');
    expect(Buffer.concat(sink.peers.at(-1)!.received).length).toBe(0);
  });

  it('slow_close holds the close for the delay', async () => {
    const proxy = await proxyTo(tp.client, 'slow', echo.address);
    await addToxic(proxy, 'slow_close', { delay: 100 });
    const client = await openClient(proxy.listen);
    await client.roundTrip('data');
    const started = performance.now();
    client.socket.end();
    const { at } = await client.closed;
    expect(at - started).toBeGreaterThanOrEqual(90);
    expect(client.received().toString()).toBe('data');
  });

  it('limit_data forwards only the given bytes, then closes', async () => {
    const proxy = await proxyTo(tp.client, 'limit', sink.address);
    await addToxic(proxy, 'limit_data', { bytes: 10 }, { stream: 'upstream' });
    const client = await openClient(proxy.listen);
    client.socket.write('0123456');
    await sleep(20);
    client.socket.write('789abcdef');
    await client.closed;
    const peer = sink.peers.at(-1)!;
    await peer.closed;
    expect(Buffer.concat(peer.received).toString()).toBe('0123456789');
  });

  it('slicer cuts data into small pieces with a delay between them, bytes intact', async () => {
    const proxy = await proxyTo(tp.client, 'slicer', echo.address);
    await addToxic(proxy, 'slicer', { average_size: 1, size_variation: 0, delay: 5_000 });
    const client = await openClient(proxy.listen);
    const elapsed = await client.roundTrip('abcdefghijklmnopqrstuvwx');
    expect(client.received().toString()).toBe('abcdefghijklmnopqrstuvwx');
    expect(client.pieces()).toBeGreaterThanOrEqual(4);
    expect(elapsed).toBeGreaterThanOrEqual(90);

    const big = randomBytes(48_000);
    const proxy2 = await proxyTo(tp.client, 'slicer-big', echo.address);
    await addToxic(proxy2, 'slicer', { average_size: 1024, size_variation: 512, delay: 0 });
    const client2 = await openClient(proxy2.listen);
    await client2.roundTrip(big);
    expect(client2.received().equals(big)).toBe(true);
    client.socket.destroy();
    client2.socket.destroy();
  });

  it('reset removes a timeout toxic, which closes its connections', async () => {
    const proxy = await proxyTo(tp.client, 'reset-all', echo.address);
    await addToxic(proxy, 'timeout', { timeout: 0 });
    const client = await openClient(proxy.listen);
    // The link exists once the proxy has dialed the upstream; dropped data shows the toxic is on it.
    client.socket.write('dropped');
    await sleep(50);
    await tp.client.reset();
    await client.closed;
    const fresh = await openClient(proxy.listen);
    await fresh.roundTrip('clean');
    fresh.socket.destroy();
  });
});

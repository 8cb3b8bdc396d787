// The HTTP API as toxiproxy-node-client 4.1 uses it, plus raw requests for status codes and error bodies.
import type { ICreateToxicBody, Latency } from 'toxiproxy-node-client';
import { describe, expect, it } from 'vitest';
import { connectRefused, portOf, proxyTo, useToxiproxy } from './helpers.ts';

const tp = useToxiproxy();

async function raw(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${tp.server.url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** The client's types demand every field; real callers (and its own tests) send only some. */
function toxicBody<T>(body: Partial<ICreateToxicBody<T>>): ICreateToxicBody<T> {
  return body as ICreateToxicBody<T>;
}

const UPSTREAM = '127.0.0.1:1';

describe('toxiproxy API: proxies', () => {
  it('answers /version with the Go server text and lists no proxies at first', async () => {
    const version = await tp.client.getVersion();
    expect(version).toBe('{"version": "2.12.0"}\n');
    expect(await tp.client.getAll()).toEqual({});
    expect((await raw('GET', '/proxies')).text).toBe('{}');
  });

  it('creates a proxy on port 0 and reports the bound address, then gets and lists it', async () => {
    const created = await proxyTo(tp.client, 'us-east->eu-west', UPSTREAM);
    expect(created.listen).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(portOf(created.listen)).toBeGreaterThan(0);
    expect(created.enabled).toBe(true);
    expect(await connectRefused(created.listen)).toBe(false);

    const fetched = await tp.client.get('us-east->eu-west');
    expect(fetched.toJson()).toEqual(created.toJson());
    const all = await tp.client.getAll();
    expect(Object.keys(all)).toEqual(['us-east->eu-west']);
    expect(all['us-east->eu-west']!.listen).toBe(created.listen);

    const body = JSON.parse((await raw('GET', '/proxies/us-east-%3Eeu-west')).text);
    expect(body).toEqual({
      name: 'us-east->eu-west',
      listen: created.listen,
      upstream: UPSTREAM,
      enabled: true,
      Logger: {},
      toxics: [],
    });
  });

  it('resolves hostnames in listen (localhost → 127.0.0.1)', async () => {
    const proxy = await tp.client.createProxy({ name: 'named', listen: 'localhost:0', upstream: UPSTREAM });
    expect(proxy.listen).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('binds wildcard listens on every interface and reports them as Go does', async () => {
    for (const listen of ['0.0.0.0:0', '']) {
      const proxy = await tp.client.createProxy({ name: `any${listen}`, listen, upstream: UPSTREAM });
      // Dual-stack where IPv6 exists ([::]:P, as Go reports it), otherwise all IPv4 interfaces.
      expect(proxy.listen).toMatch(/^(\[::\]|0\.0\.0\.0):\d+$/);
      expect(await connectRefused(proxy.listen)).toBe(false);
    }
  });

  it('rejects a duplicate name with 409 and a taken port with 500', async () => {
    const first = await proxyTo(tp.client, 'dup', UPSTREAM);
    await expect(proxyTo(tp.client, 'dup', UPSTREAM)).rejects.toThrow('Request failed with status code 409');
    const conflict = await raw('POST', '/proxies', { name: 'other', listen: first.listen, upstream: UPSTREAM });
    expect(conflict.status).toBe(500);
    expect(JSON.parse(conflict.text)).toEqual({
      error: `listen tcp ${first.listen}: bind: address already in use`,
      status: 500,
    });
    expect(await tp.client.getAll()).not.toHaveProperty('other');
  });

  it('keeps a disabled proxy closed with listen as given; enabling binds and disabling closes again', async () => {
    const created = await tp.client.createProxy({ name: 'off', listen: 'localhost:0', upstream: UPSTREAM, enabled: false });
    expect(created.enabled).toBe(false);
    expect(created.listen).toBe('localhost:0');

    const on = await created.update({ enabled: true, listen: created.listen, upstream: UPSTREAM });
    expect(on.enabled).toBe(true);
    expect(on.listen).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(await connectRefused(on.listen)).toBe(false);

    const off = await on.update({ enabled: false, listen: on.listen, upstream: UPSTREAM });
    expect(off.enabled).toBe(false);
    expect(off.listen).toBe(on.listen);
    expect(await connectRefused(on.listen)).toBe(true);

    // Re-enabling comes back on the same port, and an unresolvable upstream is accepted (checked per connection).
    const back = await off.update({ enabled: true, listen: off.listen, upstream: 'somehost:12345' });
    expect(back.listen).toBe(on.listen);
    expect(back.upstream).toBe('somehost:12345');
    expect(await connectRefused(back.listen)).toBe(false);
  });

  it('updates with PATCH and partial bodies, keeping the other fields', async () => {
    const proxy = await proxyTo(tp.client, 'patched', UPSTREAM);
    const patched = await raw('PATCH', '/proxies/patched', { upstream: '127.0.0.1:2' });
    expect(patched.status).toBe(200);
    expect(JSON.parse(patched.text)).toMatchObject({ listen: proxy.listen, upstream: '127.0.0.1:2', enabled: true });
    const disabled = await raw('POST', '/proxies/patched', { enabled: false });
    expect(JSON.parse(disabled.text)).toMatchObject({ enabled: false, upstream: '127.0.0.1:2' });
  });

  it('deletes a proxy: its port closes and a second delete is 404', async () => {
    const proxy = await proxyTo(tp.client, 'gone', UPSTREAM);
    await proxy.remove();
    expect(await connectRefused(proxy.listen)).toBe(true);
    await expect(tp.client.get('gone')).rejects.toThrow('Request failed with status code 404');
    await expect(proxy.remove()).rejects.toThrow('Request failed with status code 404');
    const again = await raw('DELETE', '/proxies/gone');
    expect(again.text).toBe('{"error":"proxy not found","status":404}\n');
    expect(again.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  });

  it('populates: creates in order, keeps an equal proxy with its toxics, replaces a changed one', async () => {
    const populated = await tp.client.populate([
      { name: 'p1', listen: '127.0.0.1:0', upstream: UPSTREAM },
      { name: 'p2', listen: '127.0.0.1:0', upstream: UPSTREAM, enabled: false },
    ]);
    expect(Object.keys(populated)).toEqual(['p1', 'p2']);
    expect(populated.p1!.enabled).toBe(true);
    expect(populated.p2!.enabled).toBe(false);
    await populated.p1!.addToxic(toxicBody<Latency>({ type: 'latency', attributes: { latency: 5, jitter: 0 } }));

    // Same (resolved) address and upstream: kept as it is. A different upstream: replaced, toxics gone.
    const again = await raw('POST', '/populate', [
      { name: 'p1', listen: populated.p1!.listen.replace('127.0.0.1', 'localhost'), upstream: UPSTREAM },
      { name: 'p2', listen: '127.0.0.1:0', upstream: '127.0.0.1:2' },
    ]);
    expect(again.status).toBe(201);
    const [p1, p2] = JSON.parse(again.text).proxies;
    expect(p1.listen).toBe(populated.p1!.listen);
    expect(p1.toxics).toHaveLength(1);
    expect(p2).toMatchObject({ upstream: '127.0.0.1:2', enabled: true, toxics: [] });

    expect(await tp.client.populate([])).toEqual({});
    expect((await raw('POST', '/populate', [])).text).toBe('{"proxies":[]}');
  });

  it('populate validates every entry first and reports a part-way failure with what it created', async () => {
    const invalid = await raw('POST', '/populate', [
      { name: 'v1', listen: '127.0.0.1:0', upstream: UPSTREAM },
      { name: '', listen: '127.0.0.1:0', upstream: UPSTREAM },
    ]);
    expect(invalid.status).toBe(400);
    expect(JSON.parse(invalid.text).error).toBe('missing required field: name at proxy 2');
    expect(await tp.client.getAll()).toEqual({});

    const partial = await raw('POST', '/populate', [
      { name: 'v1', listen: '127.0.0.1:0', upstream: UPSTREAM },
      { name: 'v2', listen: 'no-port-here', upstream: UPSTREAM },
      { name: 'v3', listen: '127.0.0.1:0', upstream: UPSTREAM },
    ]);
    expect(partial.status).toBe(500);
    const body = JSON.parse(partial.text);
    expect(body.error).toBe('address no-port-here: missing port in address');
    expect(body.proxies.map((p: { name: string }) => p.name)).toEqual(['v1']);
    expect(Object.keys(await tp.client.getAll())).toEqual(['v1']);
  });

  it('resets: re-enables proxies and removes every toxic', async () => {
    const proxy = await proxyTo(tp.client, 'r', UPSTREAM);
    await proxy.addToxic(toxicBody<Latency>({ type: 'latency', attributes: { latency: 5, jitter: 0 } }));
    await proxy.update({ enabled: false, listen: proxy.listen, upstream: UPSTREAM });
    await tp.client.reset();
    const after = await tp.client.get('r');
    expect(after.enabled).toBe(true);
    expect(after.listen).toBe(proxy.listen);
    expect(JSON.parse((await raw('GET', '/proxies/r/toxics')).text)).toEqual([]);
    expect((await raw('POST', '/reset')).status).toBe(204);
  });

  it('returns the Go error codes and bodies', async () => {
    expect(await raw('POST', '/proxies', { listen: '127.0.0.1:0', upstream: UPSTREAM })).toMatchObject({
      status: 400,
      text: '{"error":"missing required field: name","status":400}\n',
    });
    expect(JSON.parse((await raw('POST', '/proxies', { name: 'x', upstream: '' })).text).error).toBe('missing required field: upstream');
    const notJson = await raw('POST', '/proxies', '{nope');
    expect(notJson.status).toBe(400);
    expect(JSON.parse(notJson.text).error).toMatch(/^bad request body: /);
    const wrongType = await raw('POST', '/proxies', { name: 'x', upstream: UPSTREAM, enabled: 'yes' });
    expect(wrongType.status).toBe(400);
    expect(await raw('GET', '/proxies/missing')).toMatchObject({ status: 404 });
    expect(await raw('GET', '/proxies/missing/toxics')).toMatchObject({ status: 404 });
    expect(await raw('POST', '/proxies/missing/toxics', { type: 'latency' })).toMatchObject({ status: 404 });
    expect(await raw('DELETE', '/proxies/missing/toxics/t')).toMatchObject({ status: 404 });
    expect(await raw('DELETE', '/proxies')).toMatchObject({ status: 405 });
    expect(await raw('GET', '/nothing')).toMatchObject({ status: 404, text: '404 page not found\n' });
    expect(await raw('GET', '/proxies/')).toMatchObject({ status: 404 });
  });

  it('refuses browsers and tags every response with a request id', async () => {
    const browser = await raw('GET', '/version', undefined, { 'User-Agent': 'Mozilla/5.0 (X11)' });
    expect(browser).toMatchObject({ status: 403, text: 'User agent not allowed\n' });
    const wget = await raw('GET', '/version', undefined, { 'User-Agent': 'Wget/1.21' });
    expect(wget.status).toBe(200);
    expect(wget.headers.get('x-toxiproxy-request-id')).toBeTruthy();
    expect(browser.headers.get('x-toxiproxy-request-id')).not.toBe(wget.headers.get('x-toxiproxy-request-id'));
  });
});

describe('toxiproxy API: toxics', () => {
  it('creates with defaults, gets, updates by merging, removes', async () => {
    const proxy = await proxyTo(tp.client, 't', UPSTREAM);
    const toxic = await proxy.addToxic(toxicBody<Latency>({ type: 'latency', attributes: { latency: 1000, jitter: 100 } }));
    expect(toxic.toJson()).toEqual({
      name: 'latency_downstream',
      type: 'latency',
      stream: 'downstream',
      toxicity: 1,
      attributes: { latency: 1000, jitter: 100 },
    });
    const fetched = await proxy.getToxic<Latency>('latency_downstream');
    expect(fetched.toJson()).toEqual(toxic.toJson());

    const updated = await toxic.update(toxicBody<Latency>({ attributes: { latency: 12345 } as Latency }));
    expect(updated.attributes).toEqual({ latency: 12345, jitter: 100 });
    expect(updated.toxicity).toBe(1);
    const withToxicity = await raw('PATCH', '/proxies/t/toxics/latency_downstream', { toxicity: 0.5 });
    expect(JSON.parse(withToxicity.text)).toMatchObject({ toxicity: 0.5, attributes: { latency: 12345, jitter: 100 } });

    await updated.remove();
    await expect(proxy.getToxic('latency_downstream')).rejects.toThrow('Request failed with status code 404');
    await expect(updated.remove()).rejects.toThrow('Request failed with status code 404');
  });

  it('echoes the attributes of every toxic type and lists upstream toxics first', async () => {
    const proxy = await proxyTo(tp.client, 'all', UPSTREAM);
    const cases: Array<[string, Record<string, number>]> = [
      ['latency', { latency: 10, jitter: 2 }],
      ['bandwidth', { rate: 100 }],
      ['slow_close', { delay: 10 }],
      ['timeout', { timeout: 10 }],
      ['reset_peer', { timeout: 10 }],
      ['slicer', { average_size: 10, size_variation: 2, delay: 100 }],
      ['limit_data', { bytes: 100 }],
    ];
    for (const [type, attributes] of cases) {
      const toxic = await proxy.addToxic(
        toxicBody({ type: type as ICreateToxicBody<unknown>['type'], stream: 'downstream', attributes, toxicity: 0 }),
      );
      expect(toxic.attributes).toEqual(attributes);
      expect(toxic.toxicity).toBe(0);
    }
    const up = await proxy.addToxic(toxicBody({ type: 'latency', name: 'up', stream: 'upstream', attributes: {} }));
    expect(up.attributes).toEqual({ latency: 0, jitter: 0 });
    const listed = JSON.parse((await raw('GET', '/proxies/all/toxics')).text);
    expect(listed.map((t: { name: string }) => t.name)).toEqual(['up', ...cases.map(([type]) => `${type}_downstream`)]);
    const viaProxy = JSON.parse((await raw('GET', '/proxies/all')).text);
    expect(viaProxy.toxics).toEqual(listed);
  });

  it('rejects bad toxics with the Go status codes', async () => {
    await proxyTo(tp.client, 'bad', UPSTREAM);
    const post = (body: unknown) => raw('POST', '/proxies/bad/toxics', body);
    expect(JSON.parse((await post({ type: 'latency', stream: 'walrustream' })).text)).toEqual({
      error: 'stream was invalid, can be either upstream or downstream',
      status: 400,
    });
    expect((await post({ type: 'latency', stream: '' })).status).toBe(400);
    expect(JSON.parse((await post({ type: 'down' })).text)).toEqual({ error: 'invalid toxic type', status: 400 });
    expect((await post({ type: 'latency', attributes: { latency: 100.5 } })).status).toBe(400);
    expect((await post({ type: 'latency', attributes: { latency: '100' } })).status).toBe(400);
    expect((await post({ type: 'latency', name: 'x', stream: 'upstream' })).status).toBe(200);
    // Names are unique across both directions and types.
    expect(await post({ type: 'bandwidth', name: 'x', stream: 'downstream' })).toMatchObject({
      status: 409,
      text: '{"error":"toxic already exists","status":409}\n',
    });
    // Default names per direction coexist; the caller's spelling of the stream is kept.
    expect(JSON.parse((await post({ type: 'latency', stream: 'Upstream' })).text)).toMatchObject({
      name: 'latency_Upstream',
      stream: 'Upstream',
    });
    expect((await post({ type: 'latency' })).status).toBe(200);
    expect(JSON.parse((await post({ type: 'noop' })).text)).toMatchObject({ name: 'noop_downstream', attributes: {} });
    expect(await raw('GET', '/proxies/bad/toxics/nope')).toMatchObject({ status: 404 });
    expect(await raw('POST', '/proxies/bad/toxics/nope', { toxicity: 1 })).toMatchObject({ status: 404 });
    expect((await raw('POST', '/proxies/bad/toxics/x', '')).status).toBe(400);
  });
});

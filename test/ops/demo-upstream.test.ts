// The demo upstream answers every request with JSON that says what reached it.
import { afterAll, describe, expect, it } from 'vitest';
import { startDemoUpstream } from '../../src/demo/upstream.ts';

describe('demo upstream', async () => {
  const upstream = await startDemoUpstream({ port: 0 });
  const named = await startDemoUpstream({ port: 0, region: 'eu-west' });
  afterAll(() => Promise.all([upstream.close(), named.close()]));

  it('describes the request it got', async () => {
    const response = await fetch(`${upstream.url}/search?q=1`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ ok: true, path: '/search', method: 'GET' });
  });

  it('reads a request body and reports the method', async () => {
    const response = await fetch(`${upstream.url}/checkout`, { method: 'POST', body: JSON.stringify({ items: [1, 2, 3] }) });
    expect(await response.json()).toEqual({ ok: true, path: '/checkout', method: 'POST' });
  });

  it('names its region when configured, and otherwise echoes the gateway region header (capped)', async () => {
    expect(await (await fetch(`${named.url}/x`)).json()).toEqual({ ok: true, region: 'eu-west', path: '/x', method: 'GET' });
    const echoed = await (await fetch(`${upstream.url}/y`, { headers: { 'x-quotafed-region': 'ap-south' } })).json();
    expect(echoed).toEqual({ ok: true, region: 'ap-south', path: '/y', method: 'GET' });
    const long = await (await fetch(`${upstream.url}/z`, { headers: { 'x-quotafed-region': 'r'.repeat(500) } })).json();
    expect((long as { region: string }).region).toHaveLength(64);
  });

  it('refuses to start on a port that is taken', async () => {
    await expect(startDemoUpstream({ port: upstream.port })).rejects.toThrow(/EADDRINUSE/);
  });
});

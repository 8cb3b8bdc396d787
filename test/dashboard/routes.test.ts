// The dashboard's HTTP surface on a real listener: the page, the event stream (one snapshot per interval, a
// cap on open streams, the count going back down when clients leave) and the annotation endpoint.
import { serve } from '@hono/node-server';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnnotationStore } from '../../src/dashboard/annotations.ts';
import { registerDashboard, type DashboardHandle } from '../../src/dashboard/routes.ts';
import { requireAdminToken } from '../../src/http/admin.ts';
import type { QuotafedEnv } from '../../src/http/env.ts';
import type { DashboardSnapshot, DashboardSource } from '../../src/dashboard/types.ts';
import { eventually } from '../support/wait.ts';

function fixedSource(region: string, annotations: ReturnType<typeof createAnnotationStore>): DashboardSource & { calls: number } {
  const source = {
    calls: 0,
    async snapshot(): Promise<DashboardSnapshot> {
      source.calls += 1;
      return {
        at: Date.now(),
        region,
        regions: [{ name: region, self: true, weight: 1 }],
        links: [],
        endpoints: [],
        breaker: { state: 'closed', transitions: 0 },
        keys: [],
        rules: [],
        topLimited: [],
        annotations: annotations.current(),
        syncIntervalMs: null,
      };
    },
  };
  return source;
}

/** Reads SSE events from a fetch response until `count` arrived. */
async function readEvents(response: Response, count: number): Promise<Array<{ event: string; data: string }>> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: Array<{ event: string; data: string }> = [];
  let buffer = '';
  while (events.length < count) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
        .join('\n');
      events.push({ event, data });
    }
  }
  await reader.cancel();
  return events;
}

const TOKEN = 'dashboard-test-admin-token';
const AUTH = { authorization: `Bearer ${TOKEN}` };

describe('dashboard routes', () => {
  const annotations = createAnnotationStore();
  const source = fixedSource('us-east', annotations);
  let server: Server;
  let base: string;
  let handle: DashboardHandle;

  beforeAll(async () => {
    const app = new Hono<QuotafedEnv>();
    // As on a region's public port: the annotation routes sit behind the admin token.
    handle = registerDashboard(app, source, { intervalMs: 50, maxStreams: 2, annotations, annotationsGuard: requireAdminToken(TOKEN) });
    server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server)) as Server;
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('serves one self-contained page: no external URL, a CSP that allows only its own script', async () => {
    const response = await fetch(`${base}/dashboard`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/html');
    const html = await response.text();
    expect(html).not.toMatch(/(src|href)=["']?https?:/);
    expect(html).not.toMatch(/@import|url\(http/);
    const csp = response.headers.get('content-security-policy')!;
    expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
  });

  it('streams a snapshot per interval as server-sent events', async () => {
    const response = await fetch(`${base}/dashboard/events`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const events = await readEvents(response, 3);
    expect(events.map((e) => e.event)).toEqual(['snapshot', 'snapshot', 'snapshot']);
    const snapshots = events.map((e) => JSON.parse(e.data) as DashboardSnapshot);
    expect(snapshots.every((s) => s.region === 'us-east')).toBe(true);
    expect(snapshots[2]!.at).toBeGreaterThanOrEqual(snapshots[0]!.at);
  });

  it('caps concurrent streams and frees a slot when a client goes away', async () => {
    await eventually(() => handle.openStreams() === 0, 2_000, 'no open streams');
    const first = new AbortController();
    const second = new AbortController();
    const a = await fetch(`${base}/dashboard/events`, { signal: first.signal });
    const b = await fetch(`${base}/dashboard/events`, { signal: second.signal });
    expect([a.status, b.status]).toEqual([200, 200]);
    await eventually(() => handle.openStreams() === 2, 2_000, 'two open streams');

    const third = await fetch(`${base}/dashboard/events`);
    expect(third.status).toBe(503);
    expect(third.headers.get('retry-after')).toBe('5');
    await third.body?.cancel();

    first.abort();
    second.abort();
    await eventually(() => handle.openStreams() === 0, 3_000, 'no open streams');
    const callsAfterClose = source.calls;
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Nobody is listening: no more snapshots are taken.
    expect(source.calls).toBe(callsAfterClose);

    const again = new AbortController();
    const c = await fetch(`${base}/dashboard/events`, { signal: again.signal });
    expect(c.status).toBe(200);
    again.abort();
  });

  it('takes chaos annotations behind the admin token, validates them, and shows them in the stream', async () => {
    const url = `${base}/dashboard/annotations`;
    const body = JSON.stringify({ scenario: 'x' });
    expect((await fetch(url, { method: 'POST', body })).status).toBe(401);
    expect((await fetch(url, { method: 'POST', body, headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status).toBe(401);
    expect((await fetch(url, { method: 'DELETE' })).status).toBe(401);

    const bad = await fetch(url, { method: 'POST', headers: AUTH, body: JSON.stringify({ partition: { since: 5 } }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { reasons: string[] }).reasons.join(' ')).toContain('names a region or at least one link');
    expect((await fetch(url, { method: 'POST', headers: AUTH, body: '{' })).status).toBe(400);

    const since = Date.now() - 3_000;
    const ok = await fetch(url, {
      method: 'POST',
      headers: AUTH,
      body: JSON.stringify({
        scenario: 'partition eu-west',
        partition: { links: [{ from: 'us-east', to: 'eu-west' }], since },
        leakage: { leakage: 2, budget: 15, limit: 300 },
      }),
    });
    expect(ok.status).toBe(200);

    const events = await readEvents(await fetch(`${base}/dashboard/events`), 1);
    const snapshot = JSON.parse(events[0]!.data) as DashboardSnapshot;
    expect(snapshot.annotations?.scenario).toBe('partition eu-west');
    expect(snapshot.annotations?.partition).toMatchObject({ since, links: [{ from: 'us-east', to: 'eu-west', oneWay: false }] });
    expect(snapshot.annotations?.leakage).toMatchObject({ leakage: 2, budget: 15 });

    const cleared = await fetch(url, { method: 'DELETE', headers: AUTH });
    expect(cleared.status).toBe(204);
    expect(annotations.current()).toBeNull();
  });
});

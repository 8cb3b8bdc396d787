// The dashboard's HTTP surface: the page, its event stream, and the annotation endpoint the chaos lab posts to.
// The page and the stream are read-only. The annotation routes change what operators see, so they belong
// behind the admin token: register them on the admin sub-app (see registerDashboardAnnotations).
import type { Env, Hono, MiddlewareHandler } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { AnnotationInput, type AnnotationStore } from './annotations.ts';
import { dashboardPage } from './page.ts';
import type { DashboardSource } from './types.ts';

export const DASHBOARD_PATH = '/dashboard';

export interface DashboardOptions<E extends Env = Env> {
  /** Where the page lives on `app` (default /dashboard); the stream is at `<path>/events`. */
  path?: string;
  /** Snapshot period of the stream (default 1000 ms). */
  intervalMs?: number;
  /** Open streams at most; more get 503 (default 16). */
  maxStreams?: number;
  /** A stream ends after this long (default 10 min); the browser's EventSource reconnects by itself. */
  maxStreamMs?: number;
  /** Also serve GET/POST/DELETE `<path>/annotations` on this app, from this store. */
  annotations?: AnnotationStore;
  /**
   * Runs before the annotation routes; on a public app pass the admin token check
   * (`requireAdminToken(config.admin.token)`). Omit it only where the listener is private (tests, the demo).
   */
  annotationsGuard?: MiddlewareHandler<E>;
  /** Logs stream failures; silent when omitted. */
  onError?: (error: Error) => void;
}

export interface DashboardHandle {
  /** Event streams currently open. */
  openStreams(): number;
}

const JSON_HEADERS = { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' };

function sleepUnlessAborted(ms: number, stream: SSEStreamingApi, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (stream.aborted || signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
    stream.onAbort(done);
  });
}

export function registerDashboard<E extends Env>(
  app: Hono<E>,
  source: DashboardSource,
  options: DashboardOptions<E> = {},
): DashboardHandle {
  const path = (options.path ?? DASHBOARD_PATH).replace(/\/+$/, '');
  const intervalMs = options.intervalMs ?? 1_000;
  const maxStreams = options.maxStreams ?? 16;
  const maxStreamMs = options.maxStreamMs ?? 600_000;
  const page = dashboardPage();
  let open = 0;

  app.get(path, (c) => c.html(page.html, 200, { 'Cache-Control': 'no-store', 'Content-Security-Policy': page.csp }));

  app.get(`${path}/events`, (c) => {
    if (open >= maxStreams) {
      return c.body(JSON.stringify({ error: 'Too many dashboard streams; retry later' }), 503, { ...JSON_HEADERS, 'Retry-After': '5' });
    }
    open += 1;
    const signal = c.req.raw.signal;
    return streamSSE(
      c,
      async (stream) => {
        try {
          const endAt = Date.now() + maxStreamMs;
          let id = 0;
          while (!stream.aborted && !stream.closed && !signal.aborted && Date.now() < endAt) {
            let data: string;
            try {
              data = JSON.stringify(await source.snapshot());
            } catch (error) {
              options.onError?.(error as Error);
              data = JSON.stringify({ error: (error as Error).message, at: Date.now() });
            }
            await stream.writeSSE({ event: 'snapshot', data, id: String(id++), retry: 2_000 });
            await sleepUnlessAborted(intervalMs, stream, signal);
          }
        } finally {
          open -= 1;
        }
      },
      async (error) => {
        options.onError?.(error);
      },
    );
  });

  if (options.annotations)
    registerDashboardAnnotations(app, options.annotations, { path: `${path}/annotations`, guard: options.annotationsGuard });
  return { openStreams: () => open };
}

/**
 * GET, POST (apply) and DELETE (clear) the chaos annotations at `path` (default /dashboard/annotations).
 * On a public app give `guard: requireAdminToken(token)`; on the admin sub-app (already guarded) none is needed.
 */
export function registerDashboardAnnotations<E extends Env>(
  app: Hono<E>,
  store: AnnotationStore,
  options: { path?: string; guard?: MiddlewareHandler<E> | undefined } = {},
): void {
  const path = options.path ?? `${DASHBOARD_PATH}/annotations`;
  if (options.guard) app.use(path, options.guard);
  app.post(path, async (c) => {
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      return c.body(JSON.stringify({ error: 'Invalid request body', reasons: ['body is not valid JSON'] }), 400, JSON_HEADERS);
    }
    const parsed = AnnotationInput.safeParse(body);
    if (!parsed.success) {
      const reasons = parsed.error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`);
      return c.body(JSON.stringify({ error: 'Invalid annotation', reasons }), 400, JSON_HEADERS);
    }
    return c.body(JSON.stringify(store.apply(parsed.data)), 200, JSON_HEADERS);
  });
  app.get(path, (c) => c.body(JSON.stringify(store.current()), 200, JSON_HEADERS));
  app.delete(path, (c) => {
    store.clear();
    return c.body(null, 204);
  });
}

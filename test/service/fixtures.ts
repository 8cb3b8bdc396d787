// Shared helpers for the service and HTTP tests: configs built from the region files, a log capture and a
// tiny upstream that counts what reaches it.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { createLogger, type Logger } from '../../src/log.ts';

type Raw = Record<string, unknown>;

/**
 * regions/us-east.yaml as a single region on the given Redis: federation peers removed (the federation tests
 * have their own), a free port, a 2 s command timeout, no upstream unless given. `patch` edits the raw YAML object before validation.
 */
export function seedConfig(redisUrl: string, patch: (raw: Raw) => void = () => undefined): Config {
  const raw = parseYaml(readFileSync(new URL('../../regions/us-east.yaml', import.meta.url), 'utf8')) as Raw;
  delete raw.federation;
  delete raw.upstream;
  raw.port = 0;
  raw.logLevel = 'silent';
  // The region file's 50 ms command timeout is a production budget; on a loaded 2-core test machine a slow
  // reply would turn into a fail-mode decision. Tests about timeouts set their own.
  raw.redis = { ...(raw.redis as Raw), url: redisUrl, commandTimeoutMs: 2_000 };
  patch(raw);
  return parseConfig(raw, 'test config');
}

export function ruleOf(raw: Raw, name: string): Raw {
  const rule = (raw.rules as Raw[]).find((r) => r.name === name);
  if (!rule) throw new Error(`no rule ${name}`);
  return rule;
}

export interface CapturedLog {
  logger: Logger;
  lines(): Array<Record<string, unknown>>;
}

export function captureLog(level: 'debug' | 'info' = 'info'): CapturedLog {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(String(chunk));
      callback();
    },
  });
  const logger = createLogger({ level, destination });
  return {
    logger,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

export interface Upstream {
  url: string;
  /** Every request that reached the upstream, in arrival order. */
  seen: Array<{ method: string; path: string; headers: IncomingMessage['headers'] }>;
  close(): Promise<void>;
}

/**
 * A tiny upstream that answers 200 with JSON and counts what reaches it; `answerHeaders` adds headers of its own
 * to an answer (a cost header, for example).
 */
export async function startUpstream(answerHeaders: (req: IncomingMessage) => Record<string, string> = () => ({})): Promise<Upstream> {
  const seen: Upstream['seen'] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'X-Upstream': 'yes', ...answerHeaders(req) });
      res.end(JSON.stringify({ upstream: true, path: req.url }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Polling helpers live in test/support/wait.ts; re-exported for the service tests that import them here. */
export { eventually, sleep } from '../support/wait.ts';

export async function metricValue(metricsText: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  let total = 0;
  for (const line of metricsText.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const matches = Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`));
    if (matches) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** Fixed-window tests must not straddle a window edge: wait for the next one when it is close. */
export async function awayFromWindowEdge(periodMs = 60_000, marginMs = 5_000): Promise<void> {
  const left = periodMs - (Date.now() % periodMs);
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 50));
}

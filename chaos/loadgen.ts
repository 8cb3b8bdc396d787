// The load generator: sends the planned requests to the regions' POST /v1/check at their planned offsets,
// with bounded concurrency (a request waits for a free slot rather than piling up), and records every
// decision. The same requests on the window rule also go to the peer limiter, when one runs.
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { UpstashPeer } from './peer/upstash.ts';
import type { PlannedRequest } from './traffic.ts';
import { REGIONS, RULE_PATHS, type Decision, type RegionName } from './types.ts';

export interface LoadOptions {
  plan: readonly PlannedRequest[];
  serviceUrl: (region: RegionName) => string;
  /** Run start on the wall clock (ms since the epoch); decisions are timed relative to it. */
  startEpochMs: number;
  /** performance.now() at the run start: the schedule's clock. */
  startPerfMs: number;
  windowPeriodMs: number;
  bucketPeriodMs: number;
  concurrency: number;
  requestTimeoutMs?: number;
  peer?: UpstashPeer;
  /** Called about once a second. */
  onProgress?: (sent: number, total: number) => void;
  /**
   * Closed-loop phases: the plan's runs of requests with the same planned offset go out `serial` at a time (each
   * slot sends its next when its last answered; 1: one request at a time), and a run starts the gap between
   * the offsets after the previous run's last answer (a sequential pattern's pauses). Lateness is then not measured.
   */
  serial?: number;
}

export interface LoadResult {
  quotafed: Decision[];
  peer: Decision[];
  /** Requests sent later than planned because every slot was busy (a sign the machine was saturated). */
  delayed: number;
  /** How late requests left against the plan, ms (an event loop starved of CPU shows here). */
  lateness: { p50: number; p99: number; max: number };
}

export interface CheckAnswer {
  status: number;
  allowed?: boolean;
  resetAtMs?: number;
  periodMs?: number;
  source?: string;
}

/** POST /v1/check with a JSON body; status 0 when the request failed or timed out. */
export function postCheck(agent: Agent, baseUrl: string, body: string, timeoutMs: number): Promise<CheckAnswer> {
  const url = new URL('/v1/check', baseUrl);
  return new Promise((resolve) => {
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          try {
            const json = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
              allowed?: boolean;
              outcomes?: Array<{ resetAtMs?: number; periodMs?: number; source?: string }>;
            };
            const outcome = json.outcomes?.[0];
            resolve({
              status: res.statusCode ?? 0,
              allowed: json.allowed,
              resetAtMs: outcome?.resetAtMs,
              periodMs: outcome?.periodMs,
              source: outcome?.source,
            });
          } catch {
            resolve({ status: res.statusCode ?? 0 });
          }
        });
        res.on('error', () => resolve({ status: 0 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0 }));
    req.end(body);
  });
}

const now = () => performance.timeOrigin + performance.now();

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const agents = new Map<RegionName, Agent>(
    REGIONS.map((region) => [region, new Agent({ keepAlive: true, maxSockets: options.concurrency })]),
  );
  const timeoutMs = options.requestTimeoutMs ?? 5_000;
  const quotafed: Decision[] = [];
  const peer: Decision[] = [];
  let inFlight = 0;
  let freed: (() => void) | undefined;
  let delayed = 0;
  let lastProgress = 0;

  const release = () => {
    inFlight -= 1;
    freed?.();
    freed = undefined;
  };

  const sendOne = async (planned: PlannedRequest) => {
    const body = JSON.stringify({ apiKey: planned.key, method: 'GET', path: RULE_PATHS[planned.rule], ip: '10.0.0.1' });
    const sentAt = now();
    const answer = await postCheck(agents.get(planned.region)!, options.serviceUrl(planned.region), body, timeoutMs);
    const doneAt = now();
    const t = (sentAt + doneAt) / 2 - options.startEpochMs;
    const period = planned.rule === 'window' ? options.windowPeriodMs : options.bucketPeriodMs;
    const answered = answer.status === 200 && typeof answer.allowed === 'boolean';
    // The fixed window's reset is the end of the window the deciding Redis counted the request in.
    const window =
      answer.resetAtMs !== undefined && answer.periodMs
        ? Math.round(answer.resetAtMs / answer.periodMs) - 1
        : Math.floor((sentAt + doneAt) / 2 / period);
    quotafed.push({
      t,
      region: planned.region,
      key: planned.key,
      rule: planned.rule,
      outcome: !answered ? 'error' : answer.allowed ? 'admitted' : 'limited',
      window,
      source: answer.source,
      ...(answered ? {} : { status: answer.status }),
    });
  };

  const sendPeer = async (planned: PlannedRequest) => {
    const sentAt = now();
    try {
      const decision = await options.peer!.limit(planned.region, planned.key);
      const t = (sentAt + now()) / 2 - options.startEpochMs;
      peer.push({
        t,
        region: planned.region,
        key: planned.key,
        rule: 'window',
        outcome: decision.allowed ? 'admitted' : 'limited',
        window: decision.window,
      });
    } catch {
      const t = (sentAt + now()) / 2 - options.startEpochMs;
      peer.push({
        t,
        region: planned.region,
        key: planned.key,
        rule: 'window',
        outcome: 'error',
        window: Math.floor((sentAt + now()) / 2 / options.windowPeriodMs),
      });
    }
  };

  const late: number[] = [];
  const all: Promise<void>[] = [];
  if (options.serial !== undefined) {
    let sent = 0;
    for (let start = 0; start < options.plan.length; ) {
      const at = options.plan[start]!.at;
      let end = start;
      while (end < options.plan.length && options.plan[end]!.at === at) end++;
      const gap = start === 0 ? Math.max(0, options.startPerfMs + at - performance.now()) : at - options.plan[start - 1]!.at;
      if (gap > 0) await new Promise((resolve) => setTimeout(resolve, gap));
      let next = start;
      const slot = async () => {
        while (next < end) {
          await sendOne(options.plan[next++]!);
          sent += 1;
          if (options.onProgress && performance.now() - lastProgress > 1_000) {
            lastProgress = performance.now();
            options.onProgress(sent, options.plan.length);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.max(1, options.serial) }, slot));
      start = end;
    }
  }
  for (let i = 0; options.serial === undefined && i < options.plan.length; i++) {
    const planned = options.plan[i]!;
    const wait = options.startPerfMs + planned.at - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    if (inFlight >= options.concurrency) {
      delayed += 1;
      while (inFlight >= options.concurrency) await new Promise<void>((resolve) => (freed = resolve));
    }
    inFlight += 1;
    late.push(Math.max(0, performance.now() - options.startPerfMs - planned.at));
    const work =
      planned.rule === 'window' && options.peer
        ? Promise.all([sendOne(planned), sendPeer(planned)]).then(() => undefined)
        : sendOne(planned);
    all.push(work.finally(release));
    if (options.onProgress && performance.now() - lastProgress > 1_000) {
      lastProgress = performance.now();
      options.onProgress(i + 1, options.plan.length);
    }
  }
  await Promise.all(all);
  for (const agent of agents.values()) agent.destroy();
  late.sort((a, b) => a - b);
  const at = (q: number) => Math.round(late[Math.min(late.length - 1, Math.floor(q * late.length))] ?? 0);
  return { quotafed, peer, delayed, lateness: { p50: at(0.5), p99: at(0.99), max: Math.round(late.at(-1) ?? 0) } };
}

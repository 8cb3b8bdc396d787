// What /readyz reports. Ready means "this instance can answer as its fail modes say": an unreachable Redis does not
// make it unready, because every instance of a region shares that Redis and a balancer would drain them all at
// once (a total outage, whatever `failMode: open` and the local fallback promise). Redis's health is in the body
// and in `quotafed_redis_up`; `readiness.requireRedis: true` makes an unreachable Redis (or an open breaker) a
// reason again, for fleets that would rather fail over to another region.
import { connect } from 'node:net';
import type { Config } from '../config/schema.ts';
import type { Breaker } from '../engine/breaker.ts';
import type { RegionRedis } from '../store/client.ts';
import { redisUp } from '../metrics.ts';
import type { ReadinessReport } from './ops.ts';

export interface RegionReadinessOptions {
  config: Pick<Config, 'redis' | 'readiness'>;
  redis: RegionRedis;
  breaker: Pick<Breaker, 'state' | 'reason'>;
  /** Problems that make the instance unready whatever the mode (a federation misconfiguration). */
  problems?: () => string[];
  /** What leaves the instance ready but is shown as `warnings` (a peer running a rule with other parameters). */
  warnings?: () => string[];
}

/** A Redis URL without its credentials: what a reason may show. */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return 'the configured Redis';
  }
}

/** Where the region's Redis is, as a reason names it. */
function redisWhere(config: Pick<Config, 'redis'>): string {
  const nodes = config.redis.clusterNodes;
  return nodes ? `Redis Cluster (${nodes.map(displayUrl).join(', ')})` : displayUrl(config.redis.url);
}

/** An ioredis connection error as its system code (ECONNREFUSED, ENOTFOUND, ETIMEDOUT…) or its message. */
function errorCode(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code ?? error.message;
}

/** Opens (and closes) a TCP connection: undefined when it connects, else the system error code or a timeout. */
function tcpProbe(url: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      resolve('invalid URL');
      return;
    }
    const socket = connect({ host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port || 6379) });
    const done = (result: string | undefined) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done(`no TCP connection within ${timeoutMs} ms`));
    socket.once('connect', () => done(undefined));
    socket.once('error', (error) => done(errorCode(error)));
  });
}

/**
 * The readiness of one region's service: PINGs Redis (bounded by the command timeout), remembers the client's last
 * connection error for the reason, and keeps `quotafed_redis_up` current.
 */
export function regionReadiness(options: RegionReadinessOptions): () => Promise<ReadinessReport> {
  const { config, redis, breaker } = options;
  const where = redisWhere(config);
  const firstUrl = config.redis.clusterNodes?.[0] ?? config.redis.url;
  let lastError: Error | undefined;
  redisUp.set(redis.status === 'ready' ? 1 : 0);
  redis.on('error', (error: Error) => {
    lastError = error;
  });
  redis.on('ready', () => {
    lastError = undefined;
    redisUp.set(1);
  });
  redis.on('close', () => redisUp.set(0));

  const redisProblem = async (): Promise<string | undefined> => {
    try {
      await redis.ping();
      redisUp.set(1);
      return undefined;
    } catch (error) {
      redisUp.set(0);
      // With no offline queue, a PING while disconnected fails with a client-internal message: a TCP connection of
      // our own (or the client's last connection error) says what failed.
      if (redis.status !== 'ready') {
        const refused = await tcpProbe(firstUrl, config.redis.commandTimeoutMs);
        const cause = refused ?? (lastError ? errorCode(lastError) : `connection ${redis.status}`);
        return `cannot reach ${where}: ${cause}`;
      }
      const message = (error as Error).message;
      if (/timed? ?out/i.test(message)) return `${where} did not answer PING within ${config.redis.commandTimeoutMs} ms`;
      return `${where} refused PING: ${message}`;
    }
  };

  return async () => {
    const problem = await redisProblem();
    const reasons = [...(options.problems?.() ?? [])];
    const strict = config.readiness.requireRedis;
    if (strict && problem !== undefined) reasons.push(problem);
    if (strict && breaker.state === 'open') reasons.push(`circuit breaker open: ${breaker.reason ?? 'Redis failures'}`);
    const warnings = options.warnings?.() ?? [];
    return {
      reasons,
      ...(warnings.length > 0 ? { warnings } : {}),
      redis: { url: where, up: problem === undefined, ...(problem !== undefined ? { error: problem } : {}) },
      breaker: breaker.state,
      mode: strict ? 'requireRedis' : 'failModes',
    };
  };
}

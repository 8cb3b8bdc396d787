// The part of the @upstash/redis client that @upstash/ratelimit's MultiRegionRatelimit calls, on ioredis:
// evalsha(sha, keys, args), eval(script, keys, args) (its fallback on NOSCRIPT) and hset(key, fields).
//
// Upstash's scripts start with `#!lua flags=allow-key-locking`, a flag Redis 7.0 rejects ("Unexpected flag in
// script shebang"). The flag only relaxes Upstash's own key locking; a script is atomic on Redis either way,
// so the adapter drops the shebang and runs the same body. Its SHA then differs from Upstash's constant, so
// the adapter remembers which script each Upstash SHA stands for.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

export interface UpstashRedisLike {
  evalsha<T = unknown>(sha: string, keys: string[], args: unknown[]): Promise<T>;
  eval<T = unknown>(script: string, keys: string[], args: unknown[]): Promise<T>;
  hset(key: string, fields: Record<string, unknown>): Promise<number>;
}

const SHEBANG = /^#![^\n]*\n/;

function sha1(text: string): string {
  return createHash('sha1').update(text, 'utf8').digest('hex');
}

/** Redis wants strings; Upstash passes numbers and, for unused arguments, null. */
function encode(args: readonly unknown[]): string[] {
  return args.map((arg) => (arg === null || arg === undefined ? '' : String(arg)));
}

export function upstashAdapter(redis: Redis): UpstashRedisLike {
  /** Upstash's SHA (of the script with its shebang) → the script Redis can run. */
  const runnable = new Map<string, string>();

  const run = async <T>(script: string, keys: string[], args: unknown[]): Promise<T> => {
    const sha = sha1(script);
    try {
      return (await redis.evalsha(sha, keys.length, ...keys, ...encode(args))) as T;
    } catch (error) {
      if (!String(error).includes('NOSCRIPT')) throw error;
      return (await redis.eval(script, keys.length, ...keys, ...encode(args))) as T;
    }
  };

  return {
    async evalsha<T>(sha: string, keys: string[], args: unknown[]): Promise<T> {
      const script = runnable.get(sha);
      if (script !== undefined) return run<T>(script, keys, args);
      return (await redis.evalsha(sha, keys.length, ...keys, ...encode(args))) as T;
    },
    async eval<T>(script: string, keys: string[], args: unknown[]): Promise<T> {
      const body = script.replace(SHEBANG, '\n');
      runnable.set(sha1(script), body);
      return run<T>(body, keys, args);
    },
    hset(key, fields) {
      return redis.hset(key, Object.fromEntries(Object.entries(fields).map(([field, value]) => [field, String(value)])));
    },
  };
}

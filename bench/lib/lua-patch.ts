// PATCH='from=>to;;from2=>to2': text replacements applied to a Lua source before a micro-bench loads it, to see
// what a part of a script costs by stubbing it (bench/lua-time.ts, bench/lua-batch-time.ts).

/**
 * `source` with each `from=>to` of `patch` applied once; throws naming a `from` the source does not hold.
 *
 * @example
 * patchedSource(src, "redis.call('PEXPIRE', key, ttl)=>");
 */
export function patchedSource(source: string, patch: string | undefined): string {
  let out = source;
  for (const part of (patch ?? '').split(';;').filter(Boolean)) {
    const [from, to] = part.split('=>') as [string, string | undefined];
    if (!out.includes(from)) throw new Error(`PATCH: no ${from} in the source`);
    out = out.replace(from, to ?? '');
  }
  return out;
}

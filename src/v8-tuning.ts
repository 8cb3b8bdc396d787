// V8 settings for a process that decides requests. One today: allocation-site pretenuring off.
//
// Under saturation a decision's objects (the request, its rule matches, the batched call, the reply) wait in queues
// long enough to outlive a young-generation scavenge, and V8 then marks their allocation sites "tenured": from then
// on it allocates those objects straight in the old generation, for the life of the process. Once the load falls
// back they die young in old space: each scavenge copies megabytes, mark-compacts run every second or two. Measured
// (docs/performance.md, thirtieth pass): an engine whose saturation run came first promoted 1.2-3.9 MB per scavenge
// at half that rate (scavenges of 3-6 ms, p99 9-27 ms, where rate-limiter-flexible in the same process read 2-4 ms);
// with pretenuring off, nothing (scavenges under 1 ms, p99 1.2-3.5 ms); a standalone region's service at saturation
// cost 16-18% less CPU per request.
import { setFlagsFromString } from 'node:v8';

/**
 * Turns V8's allocation-site pretenuring off for this process (a second call changes nothing). The region service
 * calls it as it starts; call it yourself at the top of a process that decides in-process with the engine or the
 * middleware (or start Node with `--no-allocation-site-pretenuring`). It changes only where V8 first places new
 * objects, never what the program computes.
 *
 * @example
 * ```ts
 * import { tuneV8 } from 'quotafed';
 * tuneV8();
 * ```
 */
export function tuneV8(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}

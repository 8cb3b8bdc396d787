// The toxic types the API accepts. `noop` is registered but undocumented, as in Go; `down` is not a toxic.
import { bandwidth } from './bandwidth.ts';
import { latency } from './latency.ts';
import { limitData } from './limit-data.ts';
import { noop } from './noop.ts';
import { resetPeer } from './reset-peer.ts';
import { slicer } from './slicer.ts';
import { slowClose } from './slow-close.ts';
import { timeout } from './timeout.ts';
import type { ToxicKind } from './types.ts';

export const toxicKinds: ReadonlyMap<string, ToxicKind> = new Map([
  ['latency', latency],
  ['bandwidth', bandwidth],
  ['slow_close', slowClose],
  ['timeout', timeout],
  ['reset_peer', resetPeer],
  ['slicer', slicer],
  ['limit_data', limitData],
  ['noop', noop],
]);

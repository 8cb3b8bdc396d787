// `npx tsx bench/hot-key-probe.ts [seconds] [rate]`: one hot API key far above its limit, all its traffic in region
// a of three in-process regions (test/support/federation.ts; token bucket 1,000/min, budget 5%, sync 100 ms):
// per second, what region a admitted and denied (false denials apart; with the over-limit cache on, as the service
// runs it, most denials are answered from memory), the share units it held in its view
// (σ_a = its base plus what it received less what it gave), and the gossip jobs each region sent. Shows how a hot
// key's rights move and what its false denials cost.
import { decodeState } from '../src/federation/gossip/cells.ts';
import { layoutOf } from '../src/keys.ts';
import { startDemoFederation } from './lib/demo-federation.ts';

const seconds = Number(process.argv[2] ?? 10);
const rate = Number(process.argv[3] ?? 200);
const fed = await startDemoFederation();
const a = fed.region('a');
const layout = layoutOf(a.config);
const key = layout.ruleKey('per-key', { principal: 'hot', dimensions: ['hot'] });
const n = fed.regions.length;
const self = fed.regions.indexOf(a);
const jobs = async () => {
  const total: number[] = [];
  for (const region of fed.regions) {
    const metric = (await region.registry.getMetricsAsJSON()).find((m) => m.name === 'quotafed_federation_batches_total');
    total.push(metric?.values.filter((v) => v.labels.direction === 'sent').reduce((sum, v) => sum + v.value, 0) ?? 0);
  }
  return total;
};
console.log('| s | admitted | denied | of which false | σ_a (share units of 1e6) | jobs sent a / b / c |');
console.log('| --- | --- | --- | --- | --- | --- |');
let before = await jobs();
for (let s = 0; s < seconds; s++) {
  let admitted = 0;
  let denied = 0;
  let falseDenied = 0;
  const end = Date.now() + 1000;
  const gap = 1000 / rate;
  let next = Date.now();
  const pending: Promise<void>[] = [];
  while (Date.now() < end) {
    pending.push(
      a.engine.decide({ apiKey: 'hot', ip: '', method: 'POST', path: '/' }).then((decision) => {
        if (decision.allowed) admitted++;
        else {
          denied++;
          if (decision.outcomes.some((o) => o.falseDenial)) falseDenied++;
        }
      }),
    );
    next += gap;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - Date.now())));
  }
  await Promise.all(pending);
  let sigma = '–';
  if ((await a.redis.type(key)) === 'hash') {
    const state = decodeState(await a.redis.hgetall(key), n);
    const slot = state.slots.reduce((x, y) => (y.id > x.id ? y : x));
    let received = 0;
    let given = 0;
    for (let o = 0; o < n; o++) {
      received += slot.x[o * n + self]!;
      given += slot.x[self * n + o]!;
    }
    sigma = `base + ${received} − ${given}`;
  }
  const after = await jobs();
  console.log(`| ${s + 1} | ${admitted} | ${denied} | ${falseDenied} | ${sigma} | ${after.map((v, i) => v - before[i]!).join(' / ')} |`);
  before = after;
}
await fed.close();
process.exit(0);

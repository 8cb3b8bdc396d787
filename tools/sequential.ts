// The sequential case (one key, region after region), tried as a user would: the local federation `npm start` runs (a redis-server per
// region on free ports, the demo upstream, three `quotafed serve` processes with regions/*.yaml), then one fresh
// API key sends N requests through each region's gateway in turn, one at a time, with a pause between regions.
//
//   npx tsx tools/sequential.ts [--path /search] [--per-region 60] [--pause 1500] [--rounds 2]
//                               [--start-second S]   (start each round at second S of the minute: a boundary test)
//                               [--burst N --concurrency C]   (instead: N requests into us-east, C in flight)
//
// Prints, per round and region, what was admitted and the pattern (1 admitted, 0 denied; runs shortened).
import { Agent } from 'node:http';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gatewayGet as get } from '../test/support/gateway-get.ts';
import { startLinkedFederation } from '../test/support/linked-federation.ts';

const { values } = parseArgs({
  options: {
    path: { type: 'string', default: '/search' },
    'per-region': { type: 'string', default: '60' },
    pause: { type: 'string', default: '1500' },
    rounds: { type: 'string', default: '2' },
    'start-second': { type: 'string' },
    burst: { type: 'string' },
    concurrency: { type: 'string', default: '64' },
  },
});
const REGIONS = ['us-east', 'eu-west', 'ap-south'];
const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const output: string[] = [];

/** "1111…0000" with runs of ten or more written as 1x40. */
const pattern = (outcomes: number[]) => outcomes.join('').replace(/(.)\1{9,}/g, (run) => `${run[0]}x${run.length}`);

const federation = await startLinkedFederation(root, output);
try {
  const startSecond = values['start-second'] === undefined ? undefined : Number(values['start-second']);
  for (let round = 1; round <= Number(values.rounds); round++) {
    if (startSecond !== undefined) await sleep((startSecond * 1000 - (Date.now() % 60_000) + 60_000) % 60_000);
    const apiKey = `seq-${Date.now().toString(36)}-${round}`;
    if (values.burst !== undefined) {
      const total = Number(values.burst);
      const concurrency = Number(values.concurrency);
      const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
      const region = federation.regions.find((r) => r.name === 'us-east')!;
      let sent = 0;
      let admitted = 0;
      const latencies: number[] = [];
      const started = Date.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (sent < total) {
            sent++;
            const t = performance.now();
            if ((await get(agent, region.url, values.path!, apiKey)) === 200) admitted++;
            latencies.push(performance.now() - t);
          }
        }),
      );
      agent.destroy();
      latencies.sort((a, b) => a - b);
      const p = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(0);
      console.log(
        `round ${round}: ${total} requests to ${values.path} in us-east, ${concurrency} in flight: admitted ${admitted} in ` +
          `${Date.now() - started} ms (latency p50 ${p(0.5)} ms, p99 ${p(0.99)} ms)`,
      );
      continue;
    }
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const lines: string[] = [];
    for (const [index, name] of REGIONS.entries()) {
      if (index > 0) await sleep(Number(values.pause));
      const region = federation.regions.find((r) => r.name === name)!;
      const outcomes: number[] = [];
      const started = Date.now();
      for (let i = 0; i < Number(values['per-region']); i++)
        outcomes.push((await get(agent, region.url, values.path!, apiKey)) === 200 ? 1 : 0);
      const admitted = outcomes.reduce((a, b) => a + b, 0);
      lines.push(`  ${name}: ${admitted} admitted, from second ${((started % 60_000) / 1000).toFixed(1)} [${pattern(outcomes)}]`);
    }
    agent.destroy();
    console.log(
      `round ${round}: ${values['per-region']} requests to ${values.path} per region, ${values.pause} ms apart\n${lines.join('\n')}`,
    );
  }
} finally {
  await federation.stop();
}

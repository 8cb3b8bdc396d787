// A gateway process for the local-lease tests (test/engine/lease-processes.test.ts): one engine on the Redis at
// argv[2] with the rule given as JSON in argv[3], deciding one API key (argv[4]) 4 requests at a time. It writes
// '!' once ready, waits for a first line on stdin ("go"), then writes one character per admission as it happens
// ('r' decided by Redis, 'l' from its lease) and stops, giving its leases back, once it has been refused 20 times
// in a row or reads a second line ("stop"); then it writes '\n' and exits.
import { Redis } from 'ioredis';
import { parseConfig } from '../../src/config/load.ts';
import { createRedisEngine } from '../../src/engine/redis-engine.ts';

const [url, ruleJson, apiKey] = process.argv.slice(2) as [string, string, string];
const redis = new Redis(url, { maxRetriesPerRequest: 1 });
const config = parseConfig({ region: 'us-east', rules: [JSON.parse(ruleJson)] });
const engine = createRedisEngine({ config, redis, overLimitCache: false });
/** Decisions in flight at once. */
const IN_FLIGHT = 4;
let lines = 0;
let go!: () => void;
const started = new Promise<void>((resolve) => {
  go = resolve;
});
process.stdin.on('data', (chunk: Buffer) => {
  lines += chunk.toString().split('\n').length - 1;
  if (lines >= 1) go();
});
await redis.ping();
process.stdout.write('!');
await started;
let refusedInARow = 0;
while (lines < 2 && refusedInARow < 20) {
  // Each admission is written as soon as it is known, so a kill loses only those whose answer had not come back.
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      const decision = await engine.decide({ apiKey, ip: '10.0.0.1', method: 'GET', path: '/' });
      if (decision.allowed) {
        refusedInARow = 0;
        process.stdout.write(decision.binding?.source === 'lease' ? 'l' : 'r');
      } else refusedInARow += 1;
    }),
  );
  // A gateway's requests arrive over time: let the others take their turn.
  await new Promise((resolve) => setTimeout(resolve, 2));
}
await engine.close();
await redis.quit();
process.stdout.write('\n');
process.exit(0);

// Background load for the chaos lab (`cpu-load`): closed-loop POST /v1/check on random keys, spread over the
// regions, from its own process so the runner's load generator keeps its own event loop. Runs until SIGTERM,
// then prints one JSON line: {"requests":…,"answered":…,"ms":…}.
//   node --import tsx chaos/flood.ts --urls http://127.0.0.1:1,http://127.0.0.1:2 --connections 32 --paths /a,/b
import { Agent } from 'node:http';
import { parseArgs } from 'node:util';
import { postCheck } from './loadgen.ts';

const { values } = parseArgs({
  options: { urls: { type: 'string' }, connections: { type: 'string', default: '32' }, paths: { type: 'string', default: '/' } },
});
const urls = (values.urls ?? '').split(',').filter(Boolean);
const connections = Number(values.connections);
const paths = values.paths!.split(',');
if (urls.length === 0 || !Number.isInteger(connections) || connections < 1) {
  process.stderr.write('usage: flood.ts --urls <url,…> [--connections n] [--paths /a,/b]\n');
  process.exit(2);
}

const agent = new Agent({ keepAlive: true, maxSockets: connections });
let requests = 0;
let answered = 0;
let stopped = false;
const started = Date.now();

async function once(baseUrl: string, body: string): Promise<void> {
  if ((await postCheck(agent, baseUrl, body, 5_000)).status === 200) answered++;
}

async function loop(index: number): Promise<void> {
  let n = 0;
  while (!stopped) {
    const key = `flood-${index}-${n}-${Math.random().toString(36).slice(2, 10)}`;
    const body = JSON.stringify({ apiKey: key, method: 'GET', path: paths[n % paths.length], ip: '10.0.0.2' });
    requests++;
    await once(urls[(index + n) % urls.length]!, body);
    n++;
  }
}

const loops = Array.from({ length: connections }, (_, i) => loop(i));
process.once('SIGTERM', () => {
  stopped = true;
  void Promise.race([Promise.all(loops), new Promise((resolve) => setTimeout(resolve, 2_000))]).then(() => {
    process.stdout.write(`${JSON.stringify({ requests, answered, ms: Date.now() - started })}\n`);
    agent.destroy();
    process.exit(0);
  });
});

// One GET through a region's gateway with an API key, answered with its status (0 when the request failed or
// took more than 5 s): the black-box tests and tools/sequential.ts send their traffic with it.
import { type Agent, request } from 'node:http';

export function gatewayGet(agent: Agent, baseUrl: string, path: string, apiKey: string): Promise<number> {
  const url = new URL(path, baseUrl);
  return new Promise((done) => {
    const req = request(
      { agent, host: url.hostname, port: url.port, path: url.pathname, headers: { 'x-api-key': apiKey }, timeout: 5_000 },
      (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode ?? 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => done(0));
    req.end();
  });
}

// grpcurl-style probe of a quotafed RLS listener, built from the same .proto files:
//   npx tsx tools/rls-call.ts 127.0.0.1:8181 '{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}'
//   npx tsx tools/rls-call.ts 127.0.0.1:8181 health
// Prints the request and the answer as JSON (field names as in rls.proto); exits 1 with the gRPC status on error.
import { createRlsClient } from '../src/grpc/client.ts';
import type { RateLimitRequestMessage } from '../src/grpc/messages.ts';

const [address, body] = process.argv.slice(2);
if (!address || !body) {
  process.stderr.write("usage: tsx tools/rls-call.ts <host:port> '<RateLimitRequest JSON>' | health\n");
  process.exit(2);
}
const client = createRlsClient(address);
try {
  if (body === 'health') {
    process.stdout.write(`${JSON.stringify({ status: await client.health() }, null, 2)}\n`);
  } else {
    const request = JSON.parse(body) as RateLimitRequestMessage;
    const response = await client.shouldRateLimit(request);
    // Bytes fields (raw_body, raw_value) as text, as grpcurl shows them decoded.
    const bytesAsText = (_key: string, value: unknown) =>
      value && typeof value === 'object' && (value as { type?: unknown }).type === 'Buffer'
        ? Buffer.from((value as { data: number[] }).data).toString('utf8')
        : value;
    process.stdout.write(`${JSON.stringify(response, bytesAsText, 2)}\n`);
  }
} catch (error) {
  const { code, details } = error as { code?: number; details?: string };
  process.stderr.write(`ERROR: code ${code ?? '?'}: ${details ?? (error as Error).message}\n`);
  process.exitCode = 1;
} finally {
  client.close();
}

// A typed client of quotafed's RLS and health services, built from the same .proto files: for operators'
// probes (docs/envoy.md), the tests and the bench.
import * as grpc from '@grpc/grpc-js';
import type { RateLimitRequestMessage, RateLimitResponseMessage } from './messages.ts';
import { HEALTH_SERVICE, RLS_SERVICE, serviceClient } from './proto.ts';

export interface RlsClient {
  shouldRateLimit(request: RateLimitRequestMessage, options?: { deadlineMs?: number }): Promise<RateLimitResponseMessage>;
  health(service?: string): Promise<string>;
  /** The underlying grpc-js client (raw calls, channel state). */
  readonly raw: grpc.Client;
  close(): void;
}

function unary<Req, Res>(client: grpc.Client, method: string, request: Req, deadlineMs: number): Promise<Res> {
  return new Promise((resolve, reject) => {
    const call = (
      client as unknown as Record<
        string,
        (req: Req, md: grpc.Metadata, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: Res) => void) => void
      >
    )[method]!;
    call.call(client, request, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

export function createRlsClient(address: string): RlsClient {
  const Rls = serviceClient(RLS_SERVICE);
  const Health = serviceClient(HEALTH_SERVICE);
  const rls = new Rls(address, grpc.credentials.createInsecure());
  // One channel for both services.
  const health = new Health(address, grpc.credentials.createInsecure(), { channelOverride: rls.getChannel() } as grpc.ClientOptions);
  return {
    raw: rls,
    shouldRateLimit: (request, options = {}) => unary(rls, 'ShouldRateLimit', request, options.deadlineMs ?? 5_000),
    health: async (service = '') => (await unary<{ service: string }, { status: string }>(health, 'Check', { service }, 5_000)).status,
    close() {
      rls.close();
    },
  };
}

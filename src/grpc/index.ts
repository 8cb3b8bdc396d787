// Envoy's RateLimitService v3 over gRPC (proto/): the server with its health service (server.ts), request checks
// (messages.ts), the answer with draft-03 x-ratelimit-* headers (answer.ts) and a client for tests and tools
// (client.ts). Decisions go through the same resilient engine as HTTP.
export { createRlsClient } from './client.ts';
export { startRlsServer } from './server.ts';

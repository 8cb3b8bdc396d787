// Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) and the standard gRPC
// health service, on `grpc.port`. Every descriptor is decided by the region's resilient engine, the same decision
// path as /v1/check and the gateway: federation, fail modes, shadow rules, the breaker and the metrics apply as
// they do for HTTP. A descriptor is its own decision with its own cost (hits_addend), as in envoyproxy/ratelimit;
// its limit override (RateLimitDescriptor.limit), `replaces` and `unlimited` rules apply as there (planDescriptors).
import * as grpc from '@grpc/grpc-js';
import type { Config } from '../config/schema.ts';
import { envoyEndpoint, knownDomain, planDescriptors } from '../engine/descriptors.ts';
import type { ResilientEngine } from '../engine/resilient.ts';
import type { RequestContext } from '../engine/types.ts';
import type { Logger } from '../log.ts';
import { rejectionsTally, unlimitedDecisionsTotal } from '../metrics.ts';
import { decidedBy, rateLimitResponse, UNLIMITED, type DescriptorVerdict } from './answer.ts';
import { validateRequest, type RateLimitRequestMessage, type RateLimitResponseMessage } from './messages.ts';
import { HEALTH_SERVICE, RLS_SERVICE, serviceDefinition } from './proto.ts';

export interface RlsServerOptions {
  /** Rules and settings are read from `engine.config` at each call, so a policy reload applies. */
  engine: ResilientEngine;
  grpc: NonNullable<Config['grpc']>;
  /** Listen address when `grpc.host` is not set. */
  host: string;
  logger: Logger;
  now?: () => number;
}

export interface RlsServer {
  /** host:port the server listens on. */
  readonly address: string;
  readonly port: number;
  /** Stop accepting calls, let in-flight ones finish (up to `timeoutMs`), then cut them. */
  close(timeoutMs?: number): Promise<void>;
}

/** A request body protobuf could not decode: answered INVALID_ARGUMENT by the handler, never thrown. */
class Malformed {
  constructor(readonly reason: string) {}
}

const MAX_MESSAGE_BYTES = 256 * 1024;

function withSafeDeserializer(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const wrapped: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition)) {
    wrapped[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return method.requestDeserialize(bytes);
        } catch (error) {
          return new Malformed(`request is not a valid protobuf message: ${(error as Error).message}`);
        }
      },
    };
  }
  return wrapped as grpc.ServiceDefinition;
}

function formatAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The remote_address entry of a descriptor (Envoy's remote address action), when there is one. */
function remoteAddress(entries: ReadonlyArray<{ key: string; value: string }>): string {
  return entries.find((entry) => entry.key === 'remote_address')?.value ?? 'unknown';
}

export async function startRlsServer(options: RlsServerOptions): Promise<RlsServer> {
  const { engine, logger } = options;
  const now = options.now ?? Date.now;
  const log = logger.child({ module: 'grpc' });
  let serving = true;
  /** Open Watch streams: told NOT_SERVING and ended at shutdown, so they do not hold it up. */
  const watchers = new Set<grpc.ServerWritableStream<unknown, unknown>>();

  const shouldRateLimit = async (
    call: grpc.ServerUnaryCall<RateLimitRequestMessage | Malformed, RateLimitResponseMessage>,
    callback: grpc.sendUnaryData<RateLimitResponseMessage>,
  ) => {
    const message = call.request;
    if (message instanceof Malformed) return callback({ code: grpc.status.INVALID_ARGUMENT, details: message.reason });
    const valid = validateRequest(message);
    if (!valid.ok) return callback({ code: grpc.status.INVALID_ARGUMENT, details: valid.reason });
    const { domain, descriptors } = valid.request;
    try {
      if (!knownDomain(engine.config, domain)) {
        // As envoyproxy/ratelimit: a domain without configuration limits nothing, unless told to refuse it.
        const response = rateLimitResponse(
          descriptors.map(() => undefined),
          now(),
          options.grpc.unknownDomain === 'overLimit',
        );
        if (options.grpc.unknownDomain === 'overLimit') for (const status of response.statuses) status.code = 'OVER_LIMIT';
        return callback(null, response);
      }
      const config = engine.config;
      const plan = planDescriptors(config, descriptors);
      const decisions: DescriptorVerdict[] = await Promise.all(
        descriptors.map(async (descriptor, index) => {
          const unlimited = plan.unlimited[index];
          if (unlimited) {
            // As envoyproxy/ratelimit: answered here, never sent to Redis.
            unlimitedDecisionsTotal.inc({ rule: unlimited.name, endpoint: envoyEndpoint(domain) });
            return UNLIMITED;
          }
          const address = remoteAddress(descriptor.entries);
          const request: RequestContext = {
            ip: address,
            address,
            method: 'RLS',
            path: '/',
            cost: descriptor.cost,
            descriptor: plan.replaced.size > 0 ? { ...descriptor, replaced: plan.replaced } : descriptor,
          };
          const decision = await engine.decide(request);
          // A caller on the deny list is OVER_LIMIT whether or not a rule matched (answer.ts).
          return decision.outcomes.length === 0 && decision.list?.list !== 'deny' ? undefined : decision;
        }),
      );
      const response = rateLimitResponse(decisions, now());
      // Envoy answers the client 429 for OVER_LIMIT: counted like the gateway's 429s.
      // (A deny-list refusal is counted in quotafed_list_matches_total instead.)
      if (response.overall_code === 'OVER_LIMIT' && decisions.map(decidedBy).some((decision) => decision?.binding && !decision.allowed))
        rejectionsTally.add({ endpoint: envoyEndpoint(domain) });
      callback(null, response);
    } catch (error) {
      log.error({ event: 'grpc.error', error: (error as Error).message, stack: (error as Error).stack }, 'ShouldRateLimit failed');
      callback({ code: grpc.status.INTERNAL, details: 'internal error' });
    }
  };

  const healthStatus = (service: string): 'SERVING' | 'NOT_SERVING' | undefined =>
    service === '' || service === RLS_SERVICE ? (serving ? 'SERVING' : 'NOT_SERVING') : undefined;

  const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES });
  server.addService(withSafeDeserializer(serviceDefinition(RLS_SERVICE)), {
    ShouldRateLimit: (
      call: grpc.ServerUnaryCall<RateLimitRequestMessage | Malformed, RateLimitResponseMessage>,
      callback: grpc.sendUnaryData<RateLimitResponseMessage>,
    ) => {
      void shouldRateLimit(call, callback);
    },
  });
  server.addService(withSafeDeserializer(serviceDefinition(HEALTH_SERVICE)), {
    Check: (call: grpc.ServerUnaryCall<{ service?: string } | Malformed, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      if (call.request instanceof Malformed) return callback({ code: grpc.status.INVALID_ARGUMENT, details: call.request.reason });
      const status = healthStatus(call.request.service ?? '');
      if (status === undefined) return callback({ code: grpc.status.NOT_FOUND, details: 'unknown service' });
      callback(null, { status });
    },
    Watch: (call: grpc.ServerWritableStream<{ service?: string } | Malformed, unknown>) => {
      const service = call.request instanceof Malformed ? '\u0000' : (call.request.service ?? '');
      call.write({ status: healthStatus(service) ?? 'SERVICE_UNKNOWN' });
      // The status changes only at shutdown, which ends the stream.
      watchers.add(call as grpc.ServerWritableStream<unknown, unknown>);
      call.on('cancelled', () => {
        watchers.delete(call as grpc.ServerWritableStream<unknown, unknown>);
        call.end();
      });
    },
  });

  const host = options.grpc.host ?? options.host;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(formatAddress(host, options.grpc.port), grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  const address = formatAddress(host, port);
  log.info({ event: 'grpc.listening', address }, 'Envoy rate limit service (gRPC) listening');

  let closing: Promise<void> | undefined;
  return {
    address,
    port,
    close(timeoutMs = 10_000) {
      closing ??= new Promise<void>((resolve) => {
        serving = false;
        for (const watcher of watchers) {
          watcher.write({ status: 'NOT_SERVING' });
          watcher.end();
        }
        watchers.clear();
        const timer = setTimeout(() => server.forceShutdown(), timeoutMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      return closing;
    },
  };
}

// Loads quotafed's .proto files (proto/ at the package root) with @grpc/proto-loader. The directory is found by
// walking up from this module, so it resolves from src/grpc (tsx) and from dist/src/grpc (compiled) alike.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export const RLS_PROTO = 'envoy/service/ratelimit/v3/rls.proto';
export const HEALTH_PROTO = 'grpc/health/v1/health.proto';
export const RLS_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
export const HEALTH_SERVICE = 'grpc.health.v1.Health';

/** How messages look in JS: field names as in the .proto, enums as names, 64-bit numbers as numbers. */
export const LOADER_OPTIONS: protoLoader.Options = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true };

export function protoDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'proto', RLS_PROTO))) return join(dir, 'proto');
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`quotafed: proto/${RLS_PROTO} not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

let loaded: grpc.GrpcObject | undefined;

/** The RLS and health packages (loaded once). */
export function grpcPackages(): grpc.GrpcObject {
  loaded ??= grpc.loadPackageDefinition(protoLoader.loadSync([RLS_PROTO, HEALTH_PROTO], { ...LOADER_OPTIONS, includeDirs: [protoDir()] }));
  return loaded;
}

/** A service definition by its full name ("envoy.service.ratelimit.v3.RateLimitService"). */
export function serviceDefinition(fullName: string): grpc.ServiceDefinition {
  let node: unknown = grpcPackages();
  for (const part of fullName.split('.')) node = (node as Record<string, unknown>)[part];
  const ctor = node as grpc.ServiceClientConstructor | undefined;
  if (!ctor?.service) throw new Error(`quotafed: no gRPC service ${fullName} in the loaded protos`);
  return ctor.service;
}

/** A client constructor for a service of the loaded protos (tests, bench, tools). */
export function serviceClient(fullName: string): grpc.ServiceClientConstructor {
  let node: unknown = grpcPackages();
  for (const part of fullName.split('.')) node = (node as Record<string, unknown>)[part];
  return node as grpc.ServiceClientConstructor;
}

// The RLS messages as proto-loader gives them (LOADER_OPTIONS: keepCase, enums as names, longs as numbers),
// and the validation of a request. Malformed requests are INVALID_ARGUMENT, never an exception.
import { ENVOY_UNIT_MS, ENVOY_UNITS, type EnvoyUnit } from '../config/envoy-units.ts';
import type { DescriptorRequest } from '../engine/types.ts';

export type Code = 'UNKNOWN' | 'OK' | 'OVER_LIMIT';
export type Unit = 'UNKNOWN' | Uppercase<EnvoyUnit>;

export interface RateLimitRequestMessage {
  domain?: string;
  descriptors?: Array<{
    entries?: Array<{ key?: string; value?: string }>;
    /** Envoy's per-descriptor limit override; null when absent (LOADER_OPTIONS.defaults). */
    limit?: { requests_per_unit?: number; unit?: string | number } | null;
    hits_addend?: { value?: number } | null;
  }>;
  hits_addend?: number;
}

export interface DescriptorStatusMessage {
  code: Code;
  current_limit: { name: string; requests_per_unit: number; unit: Unit } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: number; nanos: number } | null;
}

export interface RateLimitResponseMessage {
  overall_code: Code;
  statuses: DescriptorStatusMessage[];
  response_headers_to_add: Array<{ key: string; value: string }>;
  request_headers_to_add: Array<{ key: string; value: string }>;
  raw_body: Buffer;
}

/** Bounds on a request: Envoy sends a handful of short descriptors; anything far beyond is not Envoy. */
export const MAX_DESCRIPTORS = 64;
export const MAX_ENTRIES = 16;
export const MAX_TEXT_BYTES = 1_024;
/** The engine's largest cost (as /v1/check). */
export const MAX_HITS = 1_000_000;
/** The largest limit a rule may have, and so an override. */
export const MAX_OVERRIDE = 1_000_000_000;

/** The window of an override's unit (UNKNOWN, or a number this proto does not name: undefined). */
function unitMs(unit: string | number | undefined): number | undefined {
  const name = typeof unit === 'string' ? unit.toLowerCase() : undefined;
  return ENVOY_UNITS.includes(name as EnvoyUnit) ? ENVOY_UNIT_MS[name as EnvoyUnit] : undefined;
}

export interface ValidRequest {
  domain: string;
  descriptors: Array<DescriptorRequest & { cost: number }>;
}

function textOk(text: unknown): text is string {
  return typeof text === 'string' && text.length > 0 && Buffer.byteLength(text, 'utf8') <= MAX_TEXT_BYTES;
}

/** The request, or the reason it is malformed (for INVALID_ARGUMENT). */
export function validateRequest(message: RateLimitRequestMessage): { ok: true; request: ValidRequest } | { ok: false; reason: string } {
  const { domain } = message;
  if (!textOk(domain)) return { ok: false, reason: `domain must be 1-${MAX_TEXT_BYTES} bytes` };
  const descriptors = message.descriptors ?? [];
  if (descriptors.length === 0) return { ok: false, reason: 'descriptors must not be empty' };
  if (descriptors.length > MAX_DESCRIPTORS) return { ok: false, reason: `at most ${MAX_DESCRIPTORS} descriptors` };
  const requestHits = message.hits_addend ?? 0;
  if (!Number.isInteger(requestHits) || requestHits < 0 || requestHits > MAX_HITS)
    return { ok: false, reason: `hits_addend must be 0-${MAX_HITS}` };
  const valid: ValidRequest['descriptors'] = [];
  for (const [index, descriptor] of descriptors.entries()) {
    const entries = descriptor.entries ?? [];
    if (entries.length === 0) return { ok: false, reason: `descriptors[${index}].entries must not be empty` };
    if (entries.length > MAX_ENTRIES) return { ok: false, reason: `descriptors[${index}]: at most ${MAX_ENTRIES} entries` };
    for (const [at, entry] of entries.entries()) {
      if (!textOk(entry.key)) return { ok: false, reason: `descriptors[${index}].entries[${at}].key must be 1-${MAX_TEXT_BYTES} bytes` };
      if (!textOk(entry.value))
        return { ok: false, reason: `descriptors[${index}].entries[${at}].value must be 1-${MAX_TEXT_BYTES} bytes` };
    }
    const own = descriptor.hits_addend?.value;
    if (own !== undefined && (!Number.isInteger(own) || own < 0 || own > MAX_HITS))
      return { ok: false, reason: `descriptors[${index}].hits_addend must be 0-${MAX_HITS}` };
    // 0 (proto3's unset) means one hit, as in Envoy; a descriptor's own hits_addend overrides the request's.
    const cost = own || requestHits || 1;
    const override = descriptor.limit;
    let limit: DescriptorRequest['limit'];
    if (override) {
      const requestsPerUnit = override.requests_per_unit ?? 0;
      if (!Number.isInteger(requestsPerUnit) || requestsPerUnit < 1 || requestsPerUnit > MAX_OVERRIDE)
        return { ok: false, reason: `descriptors[${index}].limit.requests_per_unit must be 1-${MAX_OVERRIDE}` };
      const periodMs = unitMs(override.unit);
      if (periodMs === undefined)
        return {
          ok: false,
          reason: `descriptors[${index}].limit.unit must be one of ${ENVOY_UNITS.map((u) => u.toUpperCase()).join(', ')}`,
        };
      limit = { requestsPerUnit, periodMs };
    }
    valid.push({ domain, entries: entries.map((e) => ({ key: e.key!, value: e.value! })), cost, ...(limit ? { limit } : {}) });
  }
  return { ok: true, request: { domain, descriptors: valid } };
}

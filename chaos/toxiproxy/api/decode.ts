// Request bodies decoded the way Go's encoding/json treats them: keys match case-insensitively, unknown keys
// and nulls are ignored, and a value of the wrong type is a 400 "bad request body".
import { ApiError } from '../errors.ts';
import type { ProxyInput } from '../collection.ts';
import type { AttributeDecoder, ToxicCreateInput, ToxicUpdateInput } from '../toxic-collection.ts';

type JsonObject = Record<string, unknown>;

function badBody(detail: string): ApiError {
  return new ApiError(400, `bad request body: ${detail}`);
}

function jsonKind(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'boolean') return 'bool';
  return typeof value;
}

function wrongType(value: unknown, field: string, goType: string): ApiError {
  return badBody(`json: cannot unmarshal ${jsonKind(value)} into Go struct field ${field} of type ${goType}`);
}

export function parseBody(text: string): unknown {
  if (text.trim() === '') throw badBody('EOF');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badBody((error as Error).message);
  }
}

function asObject(value: unknown, goType: string): JsonObject {
  if (value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw badBody(`json: cannot unmarshal ${jsonKind(value)} into Go value of type ${goType}`);
  }
  return value as JsonObject;
}

/** An exact key wins; otherwise the first key that matches ignoring case. */
function field(object: JsonObject, key: string): unknown {
  if (key in object) return object[key];
  const lower = key.toLowerCase();
  const match = Object.keys(object).find((candidate) => candidate.toLowerCase() === lower);
  return match === undefined ? undefined : object[match];
}

function optionalString(object: JsonObject, key: string, struct: string): string | undefined {
  const value = field(object, key);
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw wrongType(value, `${struct}.${key}`, 'string');
  return value;
}

function optionalBool(object: JsonObject, key: string, struct: string): boolean | undefined {
  const value = field(object, key);
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw wrongType(value, `${struct}.${key}`, 'bool');
  return value;
}

function optionalNumber(object: JsonObject, key: string, struct: string): number | undefined {
  const value = field(object, key);
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number') throw wrongType(value, `${struct}.${key}`, 'float32');
  return value;
}

function proxyFields(object: JsonObject): Partial<ProxyInput> {
  return {
    name: optionalString(object, 'name', 'Proxy'),
    listen: optionalString(object, 'listen', 'Proxy'),
    upstream: optionalString(object, 'upstream', 'Proxy'),
    enabled: optionalBool(object, 'enabled', 'Proxy'),
  };
}

function requireProxy(fields: Partial<ProxyInput>, suffix = ''): ProxyInput {
  if (!fields.name) throw new ApiError(400, `missing required field: name${suffix}`);
  if (!fields.upstream) throw new ApiError(400, `missing required field: upstream${suffix}`);
  return { name: fields.name, listen: fields.listen ?? '', upstream: fields.upstream, enabled: fields.enabled ?? true };
}

export function decodeProxyCreate(body: unknown): ProxyInput {
  return requireProxy(proxyFields(asObject(body, 'toxiproxy.Proxy')));
}

/** Every entry is checked before anything is created; messages count entries from 1. */
export function decodePopulate(body: unknown): ProxyInput[] {
  if (!Array.isArray(body)) {
    throw badBody(`json: cannot unmarshal ${jsonKind(body)} into Go value of type []toxiproxy.Proxy`);
  }
  const entries = body.map((entry) => proxyFields(asObject(entry, 'toxiproxy.Proxy')));
  return entries.map((entry, index) => requireProxy(entry, ` at proxy ${index + 1}`));
}

export function decodeProxyUpdate(body: unknown): Partial<ProxyInput> {
  const { listen, upstream, enabled } = proxyFields(asObject(body, 'toxiproxy.Proxy'));
  return { listen, upstream, enabled };
}

export function decodeToxicCreate(body: unknown): ToxicCreateInput {
  const object = asObject(body, 'toxiproxy.Toxic');
  return {
    name: optionalString(object, 'name', 'Toxic'),
    type: optionalString(object, 'type', 'Toxic'),
    stream: optionalString(object, 'stream', 'Toxic'),
    toxicity: optionalNumber(object, 'toxicity', 'Toxic'),
    attributes: field(object, 'attributes'),
  };
}

export function decodeToxicUpdate(body: unknown): ToxicUpdateInput {
  const object = asObject(body, 'toxiproxy.Toxic');
  return { toxicity: optionalNumber(object, 'toxicity', 'Toxic'), attributes: field(object, 'attributes') };
}

/** Attributes are int64 fields merged onto the current values; unknown keys are ignored. */
export const decodeAttributes: AttributeDecoder = (kind, raw, base) => {
  if (raw === undefined || raw === null) return base;
  const object = asObject(raw, 'toxic attributes');
  const attributes = { ...base };
  for (const name of kind.attributes) {
    const value = field(object, name);
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      throw badBody(
        typeof value === 'number'
          ? `json: cannot unmarshal number ${value} into Go struct field .${name} of type int64`
          : `json: cannot unmarshal ${jsonKind(value)} into Go struct field .${name} of type int64`,
      );
    }
    attributes[name] = value;
  }
  return attributes;
};

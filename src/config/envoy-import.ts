// envoyproxy/ratelimit config (domain → descriptors → key/value → rate_limit) as quotafed rules, so an Envoy
// user's existing rate limit config works unchanged. Each descriptor path that carries a rate_limit becomes one
// rule with `match.envoy` (domain + the path's entries); the loader appends them to `rules` before validation.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import { ENVOY_UNIT_MS } from './envoy-units.ts';
import { EnvoyConfigDocument, EnvoyImport, type EnvoyDescriptorNode, type EnvoyEntryMatch } from './schema.ts';

export class EnvoyImportError extends Error {
  constructor(
    message: string,
    readonly fields: string[],
  ) {
    super(message);
    this.name = 'EnvoyImportError';
  }
}

function issues(error: z.ZodError, prefix: string): { fields: string[]; lines: string[] } {
  const fields = error.issues.map((issue) =>
    [prefix, ...issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`))].join(''),
  );
  return { fields, lines: error.issues.map((issue, i) => `  ${fields[i]}: ${issue.message}`) };
}

function readDocuments(file: string, baseDir: string, field: string): unknown[] {
  const path = isAbsolute(file) ? file : resolve(baseDir, file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new EnvoyImportError(`cannot read ${field} (${path}): ${(error as Error).message}`, [field]);
  }
  const documents = parseAllDocuments(text);
  const list = Array.isArray(documents) ? documents : [documents];
  return list
    .map((document, index) => {
      if (document.errors.length > 0)
        throw new EnvoyImportError(`${field} (${path}) document ${index} is not valid YAML: ${document.errors[0]!.message}`, [field]);
      return document.toJS();
    })
    .filter((doc) => doc !== null && doc !== undefined);
}

/** A rule name for a descriptor path: readable when it fits the name rules, hashed when not. */
function ruleName(domain: string, path: readonly EnvoyEntryMatch[], taken: Set<string>): string {
  const readable = `envoy.${domain}.${path.map((e) => (e.value === undefined ? e.key : `${e.key}_${e.value}`)).join('.')}`.replace(
    /[^A-Za-z0-9_.-]/g,
    '-',
  );
  let name = readable.length <= 64 ? readable : readable.slice(0, 52);
  if (name !== readable || taken.has(name)) {
    const hash = createHash('sha256')
      .update(JSON.stringify([domain, path]))
      .digest('base64url')
      .replace(/[^A-Za-z0-9]/g, '')
      .slice(0, 10);
    name = `${name.slice(0, 53)}.${hash}`;
  }
  taken.add(name);
  return name;
}

/** The limit an unlimited rule carries: required by the rule schema, never used (the rule counts nothing). */
const UNLIMITED_LIMIT = 1_000_000_000;

/**
 * The rules of validated envoyproxy/ratelimit documents. `fields` names each document in errors
 * (`envoy.configs[0]`, `envoy.files[1]<ratelimit.yaml#0>`). A `replaces` entry names a `rate_limit.name` of the
 * same domain and becomes the quotafed names of the rules with that name; one that names nothing is an error.
 *
 * @example
 * ```ts
 * const rules = envoyRules([{ domain: 'edge', descriptors: [{ key: 'ldap', rate_limit: { unlimited: true } }] }], settings);
 * // [{ name: 'envoy.edge.ldap', unlimited: true, ... }]
 * ```
 */
export function envoyRules(
  documents: readonly EnvoyConfigDocument[],
  settings: Pick<EnvoyImport, 'algorithm' | 'failMode' | 'leakageBudget'>,
  taken = new Set<string>(),
  fields: readonly string[] = documents.map((_, index) => `envoy.configs[${index}]`),
): Record<string, unknown>[] {
  const rules: Record<string, unknown>[] = [];
  /** Per domain: rate_limit.name -> the quotafed names of the rules carrying it. */
  const named = new Map<string, Map<string, string[]>>();
  const pending: Array<{ rule: Record<string, unknown>; domain: string; names: string[]; field: string }> = [];
  const walk = (domain: string, nodes: readonly EnvoyDescriptorNode[], parent: readonly EnvoyEntryMatch[], field: string) => {
    for (const [index, node] of nodes.entries()) {
      const at = `${field}.descriptors[${index}]`;
      const path = [...parent, node.value === undefined ? { key: node.key } : { key: node.key, value: node.value }];
      const limit = node.rate_limit;
      if (limit) {
        const unlimited = limit.unlimited === true;
        const rule: Record<string, unknown> = {
          name: ruleName(domain, path, taken),
          match: { envoy: { domain, descriptor: path } },
          algorithm: settings.algorithm,
          limit: unlimited ? UNLIMITED_LIMIT : limit.requests_per_unit,
          period: unlimited ? ENVOY_UNIT_MS.second : ENVOY_UNIT_MS[limit.unit!],
          failMode: settings.failMode,
          ...(settings.leakageBudget === undefined ? {} : { leakageBudget: settings.leakageBudget }),
          shadow: node.shadow_mode ?? false,
          ...(unlimited ? { unlimited: true } : {}),
        };
        rules.push(rule);
        if (limit.name !== undefined) {
          const byName = named.get(domain) ?? new Map<string, string[]>();
          byName.set(limit.name, [...(byName.get(limit.name) ?? []), rule.name as string]);
          named.set(domain, byName);
        }
        if (limit.replaces) pending.push({ rule, domain, names: limit.replaces.map((r) => r.name), field: `${at}.rate_limit.replaces` });
      }
      walk(domain, node.descriptors ?? [], path, at);
    }
  };
  documents.forEach((document, index) => walk(document.domain, document.descriptors, [], fields[index] ?? `envoy.configs[${index}]`));
  for (const { rule, domain, names, field } of pending) {
    const replaced = names.flatMap((name, index) => {
      const found = named.get(domain)?.get(name);
      if (!found)
        throw new EnvoyImportError(`${field}[${index}].name: no rate_limit named "${name}" in domain "${domain}"`, [
          `${field}[${index}].name`,
        ]);
      return found;
    });
    rule.replaces = [...new Set(replaced)];
  }
  return rules;
}

/**
 * The raw config with `envoy.configs` and `envoy.files` converted and appended to `rules`. Throws
 * EnvoyImportError naming the field (`envoy.files[0]…`) when a document is not a valid ratelimit config.
 */
export function expandEnvoyImports(raw: Record<string, unknown>, baseDir: string): Record<string, unknown> {
  if (raw.envoy === undefined) return raw;
  const parsed = EnvoyImport.safeParse(raw.envoy);
  if (!parsed.success) {
    const { fields, lines } = issues(parsed.error, 'envoy');
    throw new EnvoyImportError(`invalid envoy import:\n${lines.join('\n')}`, fields);
  }
  const documents = [...parsed.data.configs];
  const fields = documents.map((_, index) => `envoy.configs[${index}]`);
  parsed.data.files.forEach((file, index) => {
    const field = `envoy.files[${index}]`;
    for (const [docIndex, doc] of readDocuments(file, baseDir, field).entries()) {
      const checked = EnvoyConfigDocument.safeParse(doc);
      if (!checked.success) {
        const { fields, lines } = issues(checked.error, `${field}<${file}#${docIndex}>`);
        throw new EnvoyImportError(`invalid envoyproxy/ratelimit config ${file}:\n${lines.join('\n')}`, fields);
      }
      documents.push(checked.data);
      fields.push(`${field}<${file}#${docIndex}>`);
    }
  });
  const existing = Array.isArray(raw.rules) ? (raw.rules as unknown[]) : [];
  const taken = new Set(existing.map((rule) => (rule as { name?: unknown })?.name).filter((n): n is string => typeof n === 'string'));
  return { ...raw, rules: [...existing, ...envoyRules(documents, parsed.data, taken, fields)] };
}

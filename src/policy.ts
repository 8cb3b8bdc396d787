// The policy in force: one holder of the config whose rules (and leakage budget) every part reads. The engine,
// the federation (gossip applier, sweeps, resync) and the dashboard follow it through `onChange`; the admin view
// and the dashboard read `config` at request time. A reload (src/policy-reload.ts) goes through `apply`.
import { isDeepStrictEqual } from 'node:util';
import type { Config } from './config/schema.ts';

/**
 * What a reload may change, as config paths. Every other setting (ports, Redis, peers, secrets, weights, logLevel:
 * pino child loggers keep their level) needs a restart, and `restartOnlyChanges` derives that list from this one.
 */
export const RELOADABLE = ['rules', 'envoy', 'federation.leakageBudget', 'lists.allow', 'lists.deny', 'plans'] as const;

/** Read once at start-up and meaningless afterwards: a reload ignores them (dropping `bootstrap` after the first start). */
const START_UP_ONLY: readonly string[] = ['federation.bootstrap'];

/** The config paths outside RELOADABLE that differ between two configs (`federation.syncIntervalMs`, `port`, …). */
export function restartOnlyChanges(current: Config, next: Config): string[] {
  const changed: string[] = [];
  const walk = (left: unknown, right: unknown, path: string) => {
    if ((RELOADABLE as readonly string[]).includes(path) || START_UP_ONLY.includes(path)) return;
    const inside = RELOADABLE.some((reloadable) => reloadable.startsWith(`${path}.`));
    if (path !== '' && !inside) {
      if (!isDeepStrictEqual(left, right)) changed.push(path);
      return;
    }
    // A path above a reloadable one (the root, `federation`): compare its fields one by one.
    const a = (left ?? {}) as Record<string, unknown>;
    const b = (right ?? {}) as Record<string, unknown>;
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) walk(a[key], b[key], path === '' ? key : `${path}.${key}`);
  };
  walk(current, next, '');
  return changed;
}

/**
 * The rules a reload would redefine under the same name: another algorithm or period. A rule's state keys carry
 * its name only, so its counts would be read under the new parameters (share units as requests, window ids of
 * another period): docs/federation.md §4. Each as the field path of `next` that changed and why.
 *
 * @example
 * ```ts
 * redefinedRules(current, next); // [{ field: 'rules[0].period', message: 'rule "per-key": …' }]
 * ```
 */
export function redefinedRules(current: Config, next: Config): { field: string; message: string }[] {
  const before = new Map(current.rules.map((rule) => [rule.name, rule]));
  const out: { field: string; message: string }[] = [];
  next.rules.forEach((rule, index) => {
    const old = before.get(rule.name);
    if (!old) return;
    for (const part of ['algorithm', 'period'] as const) {
      if (old[part] === rule[part]) continue;
      // A rule a plan derived (src/config/plans.ts) is not in the file: its tier is.
      const base = next.plans.derived[rule.name];
      out.push({
        field: base === undefined ? `rules[${index}].${part}` : `plans.tiers (${rule.name}).${part}`,
        message:
          `rule "${rule.name}": a reload may not change its ${part} (${String(old[part])} -> ${String(rule[part])}) under the same ` +
          'name, since its state was counted under the old one; add the rule under a new name and remove the old one after ' +
          'its window (docs/federation.md §4)',
      });
    }
  });
  return out;
}

/** Reads the policy in force. */
export interface Policy {
  readonly config: Config;
}

export type PolicyListener = (next: Config, previous: Config) => void | Promise<void>;

export interface PolicyHolder extends Policy {
  /** Puts `next` in force and tells every listener, in the order they subscribed (each awaited). */
  apply(next: Config): Promise<void>;
  onChange(listener: PolicyListener): void;
}

export function createPolicyHolder(initial: Config): PolicyHolder {
  let config = initial;
  const listeners: PolicyListener[] = [];
  return {
    get config() {
      return config;
    },
    async apply(next) {
      const previous = config;
      config = next;
      for (const listener of listeners) await listener(next, previous);
    },
    onChange(listener) {
      listeners.push(listener);
    },
  };
}

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

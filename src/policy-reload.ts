// Policy reload without a restart: re-read the config file, validate it, and swap the rules atomically.
// An invalid file, or one that changes settings only a restart can apply, is rejected and the old policy stays.
// Triggers: POST /admin/policy/reload, SIGHUP, and (opt-in) a watch on the file.
import { watch, type FSWatcher } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import type { Hono } from 'hono';
import { ConfigError, loadConfigFile } from './config/load.ts';
import type { Config } from './config/schema.ts';
import type { DecisionEngine } from './engine/types.ts';
import type { ResilientEngine } from './engine/resilient.ts';
import type { AdminRoutes } from './http/admin.ts';
import type { QuotafedEnv } from './http/env.ts';
import type { Logger } from './log.ts';

/** What a reload may change. Everything else (ports, Redis, peers, secrets, weights) needs a restart. */
// (logLevel is not among them: pino child loggers keep the level they were created with.)
// `envoy` (envoyproxy/ratelimit imports) only produces rules.
export const RELOADABLE = ['rules', 'envoy', 'federation.leakageBudget'] as const;

export type ReloadResult =
  | { ok: true; rules: string[]; changed: boolean }
  | { ok: false; error: string; fields: string[] };

/** The config paths outside RELOADABLE that differ between two configs. */
export function restartOnlyChanges(current: Config, next: Config): string[] {
  const changed: string[] = [];
  for (const key of Object.keys(current) as (keyof Config)[]) {
    if (key === 'rules' || key === 'envoy') continue;
    if (key === 'federation') {
      // `bootstrap` is read once, at start-up: dropping it after the first deployment changes nothing to reload.
      const { leakageBudget: _a, bootstrap: _c, ...left } = current.federation;
      const { leakageBudget: _b, bootstrap: _d, ...right } = next.federation;
      for (const field of Object.keys(left) as (keyof typeof left)[]) {
        if (!isDeepStrictEqual(left[field], right[field])) changed.push(`federation.${field}`);
      }
      continue;
    }
    if (!isDeepStrictEqual(current[key], next[key])) changed.push(key);
  }
  return changed;
}

export interface PolicyReloaderOptions {
  configPath: string;
  engine: ResilientEngine;
  /** Builds the inner (Redis) engine for a config. */
  buildInner: (config: Config) => DecisionEngine;
  /** Others that hold the rules (the federation's gossip worker, the dashboard). */
  onReload?: (config: Config) => void;
  logger: Logger;
  env?: NodeJS.ProcessEnv;
}

export interface PolicyReloader {
  reload(): Promise<ReloadResult>;
  /** Watch the config file and reload on change (debounced). */
  watchFile(): void;
  adminRoutes: AdminRoutes;
  close(): void;
}

export function createPolicyReloader(options: PolicyReloaderOptions): PolicyReloader {
  const { engine, logger } = options;
  const log = logger.child({ module: 'policy' });
  let watcher: FSWatcher | undefined;
  let debounce: NodeJS.Timeout | undefined;
  // Reloads run one at a time, so two triggers cannot interleave their swaps.
  let chain: Promise<unknown> = Promise.resolve();

  const reloadNow = async (): Promise<ReloadResult> => {
    let next: Config;
    try {
      next = loadConfigFile(options.configPath, options.env ?? process.env);
    } catch (error) {
      const fields = error instanceof ConfigError ? error.fields : [];
      log.warn({ event: 'policy.rejected', error: (error as Error).message, fields }, 'policy reload rejected; keeping the current policy');
      return { ok: false, error: (error as Error).message, fields };
    }
    const current = engine.config;
    const restartOnly = restartOnlyChanges(current, next);
    if (restartOnly.length > 0) {
      const error = `these settings need a restart: ${restartOnly.join(', ')}`;
      log.warn({ event: 'policy.rejected', fields: restartOnly }, `policy reload rejected; ${error}`);
      return { ok: false, error, fields: restartOnly };
    }
    const rules = next.rules.map((rule) => rule.name);
    if (isDeepStrictEqual(current.rules, next.rules) && isDeepStrictEqual(current.federation, next.federation)) {
      return { ok: true, rules, changed: false };
    }
    await engine.swap({ config: next, inner: options.buildInner(next) });
    options.onReload?.(next);
    log.info({ event: 'policy.reloaded', rules }, 'policy reloaded');
    return { ok: true, rules, changed: true };
  };

  const reload = (): Promise<ReloadResult> => {
    const run = chain.then(reloadNow, reloadNow);
    chain = run.catch(() => undefined);
    return run;
  };

  return {
    reload,
    watchFile() {
      if (watcher) return;
      watcher = watch(options.configPath, () => {
        clearTimeout(debounce);
        debounce = setTimeout(() => void reload(), 200);
      });
      watcher.on('error', (error) => log.warn({ event: 'policy.watch_failed', error: error.message }, 'config watch failed'));
    },
    adminRoutes: (admin: Hono<QuotafedEnv>) => {
      admin.post('/policy/reload', async (c) => {
        const result = await reload();
        return c.json(result, result.ok ? 200 : 400);
      });
      admin.get('/policy', (c) => c.json({ rules: engine.config.rules }));
    },
    close() {
      clearTimeout(debounce);
      watcher?.close();
    },
  };
}

// Policy reload without a restart: re-read the config file, validate it, and put it in force (src/policy.ts).
// An invalid file, or one that changes settings only a restart can apply, is rejected and the old policy stays.
// Triggers: POST /admin/policy/reload, SIGHUP, and (opt-in) a watch on the file.
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { Hono } from 'hono';
import { ConfigError, loadConfigFile } from './config/load.ts';
import type { Config } from './config/schema.ts';
import type { AdminRoutes } from './http/admin.ts';
import type { QuotafedEnv } from './http/env.ts';
import type { Logger } from './log.ts';
import { redefinedRules, restartOnlyChanges, type PolicyHolder } from './policy.ts';

export type ReloadResult = { ok: true; rules: string[]; changed: boolean } | { ok: false; error: string; fields: string[] };

export interface PolicyReloaderOptions {
  configPath: string;
  /** The policy in force; its listeners (engine, federation) take the new rules. */
  policy: PolicyHolder;
  logger: Logger;
  env?: NodeJS.ProcessEnv;
  /** Told the result of every reload (the reload metrics). */
  onResult?: (result: ReloadResult) => void;
}

export interface PolicyReloader {
  reload(): Promise<ReloadResult>;
  /**
   * Watch the config file and reload on change (debounced). The watch is on its directory, filtered by name:
   * a watch on the file itself stops at the first atomic replace (a new file renamed over it) and never sees a
   * Kubernetes ConfigMap update (the `..data` symlink swapped beside it), so those names count as well.
   */
  watchFile(): void;
  adminRoutes: AdminRoutes;
  close(): void;
}

export function createPolicyReloader(options: PolicyReloaderOptions): PolicyReloader {
  const { policy, logger } = options;
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
    const current = policy.config;
    const restartOnly = restartOnlyChanges(current, next);
    if (restartOnly.length > 0) {
      const error = `these settings need a restart: ${restartOnly.join(', ')}`;
      log.warn({ event: 'policy.rejected', fields: restartOnly }, `policy reload rejected; ${error}`);
      return { ok: false, error, fields: restartOnly };
    }
    const redefined = redefinedRules(current, next);
    if (redefined.length > 0) {
      const error = redefined.map((entry) => entry.message).join('; ');
      const fields = redefined.map((entry) => entry.field);
      log.warn({ event: 'policy.rejected', fields }, `policy reload rejected; ${error}`);
      return { ok: false, error, fields };
    }
    const rules = next.rules.map((rule) => rule.name);
    if (
      isDeepStrictEqual(current.rules, next.rules) &&
      isDeepStrictEqual(current.federation, next.federation) &&
      isDeepStrictEqual(current.lists, next.lists) &&
      isDeepStrictEqual(current.plans, next.plans)
    ) {
      return { ok: true, rules, changed: false };
    }
    await policy.apply(next);
    log.info({ event: 'policy.reloaded', rules }, 'policy reloaded');
    return { ok: true, rules, changed: true };
  };

  const reload = (): Promise<ReloadResult> => {
    const run = chain.then(reloadNow, reloadNow).then(
      (result) => {
        options.onResult?.(result);
        return result;
      },
      (error: unknown) => {
        options.onResult?.({ ok: false, error: (error as Error).message, fields: [] });
        throw error;
      },
    );
    chain = run.catch(() => undefined);
    return run;
  };

  return {
    reload,
    watchFile() {
      if (watcher) return;
      const name = basename(options.configPath);
      watcher = watch(dirname(options.configPath), (_event, changed) => {
        // `changed` can be null on some platforms: then any change in the directory may be ours.
        if (changed !== null && changed !== name && !changed.startsWith('..')) return;
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
      admin.get('/policy', (c) => c.json({ rules: policy.config.rules }));
    },
    close() {
      clearTimeout(debounce);
      watcher?.close();
    },
  };
}

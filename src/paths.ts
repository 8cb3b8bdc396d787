// Where the package's own files are. src/paths.ts (run through tsx: tests, `npm start`) and dist/paths.js (the
// built and installed package) both sit one level below the package root, which holds lua/ and regions/.
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);

/** The package root (a checkout, or node_modules/quotafed once installed). */
export const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The Lua scripts (lua/*.lua, lua/includes/). */
export const LUA_DIR = join(PACKAGE_ROOT, 'lua');
/** The shipped region configs and their template. */
export const REGIONS_DIR = join(PACKAGE_ROOT, 'regions');

/** True when this code runs from TypeScript sources (a checkout under tsx), false from the compiled dist/. */
export const FROM_SOURCE = extname(self) === '.ts';

/** The command line's entry module: src/cli/main.ts in a checkout, dist/cli/main.js when built. */
export const CLI_ENTRY = fileURLToPath(new URL(`./cli/main${FROM_SOURCE ? '.ts' : '.js'}`, import.meta.url));

/** node arguments that run `CLI_ENTRY` in a child process (tsx's loader only when running from sources). */
export function cliCommand(...args: string[]): string[] {
  return [...(FROM_SOURCE ? ['--import', 'tsx'] : []), CLI_ENTRY, ...args];
}

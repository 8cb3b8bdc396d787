#!/usr/bin/env node
// The quotafed command. The installed package runs the compiled CLI (dist/cli/main.js) with no TypeScript
// toolchain; a checkout (src/ present, no build needed) runs the sources through tsx, a devDependency.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli/main.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import(new URL('../dist/cli/main.js', import.meta.url).href);
}

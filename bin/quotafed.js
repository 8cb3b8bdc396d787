#!/usr/bin/env node
// Runs the TypeScript CLI directly through tsx, so `npx quotafed serve …` works without a build step.
import { register } from 'tsx/esm/api';

register();
await import(new URL('../src/cli/main.ts', import.meta.url).href);

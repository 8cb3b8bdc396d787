#!/usr/bin/env node
// Proves the npm package works as a new user gets it (CI runs this on every run; `npm run pack:check`):
//   1. `npm pack` (prepack builds dist/), and `tar tzf` lists the product only: no test, bench or chaos file;
//   2. `npm install ./quotafed-*.tgz ioredis` into an empty temporary project (node_modules come from that
//      install, not from this checkout, and hold no tsx or TypeScript);
//   3. the README's library snippet runs there against a real redis-server on a free port, and a TypeScript
//      file importing 'quotafed' and the README's 'quotafed/hono' snippet type-check against the shipped
//      declarations;
//   3c. each entry loads only what its audience needs: 'quotafed' and 'quotafed/engine' load no @grpc/grpc-js,
//      bullmq or @hono/node-server; 'quotafed/hono' no gRPC or BullMQ; 'quotafed/service' imports (and does load
//      all three, which shows the probe sees them); no entry loads @opentelemetry (tracing is imported on demand);
//   4. `npx quotafed check-config` accepts the shipped region file, and `npx quotafed serve` starts from the
//      installed bin and answers /readyz.
// Plain JavaScript so it needs nothing but node, npm, tar and redis-server. Exit code 0 only when all pass.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KEEP = process.argv.includes('--keep');
const work = mkdtempSync(join(tmpdir(), 'quotafed-pack-'));
const children = [];
const started = Date.now();

const say = (line) => process.stdout.write(`pack-check: ${line}\n`);
function fail(message) {
  process.stderr.write(`pack-check: FAILED: ${message}\n`);
  process.exitCode = 1;
  throw new Error(message);
}
function run(command, args, options = {}) {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options });
  } catch (error) {
    fail(`${command} ${args.join(' ')} exited ${error.status}:\n${error.stdout ?? ''}${error.stderr ?? ''}`);
  }
}
const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A child process whose output is kept for the failure message; stopped at the end. */
function start(command, args, options) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  const output = [];
  child.stdout.on('data', (chunk) => output.push(String(chunk)));
  child.stderr.on('data', (chunk) => output.push(String(chunk)));
  children.push(child);
  return { child, output: () => output.join('') };
}

async function main() {
  // 1. Pack (the prepack script builds dist/ from src/ with tsconfig.build.json).
  const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], { cwd: ROOT }));
  const tarball = join(work, packed[0].filename);
  const listing = run('tar', ['tzf', tarball]).trim().split('\n');
  const files = listing.filter((line) => !line.endsWith('/')).map((line) => line.replace(/^package\//, ''));
  const forbidden = files.filter(
    (path) =>
      /(^|\/)(test|tests|bench|chaos|tools|__tests__|testing)(\/|$)/.test(path) ||
      /\.(test|spec)\.[cm]?[jt]s$/.test(path) ||
      /^src\//.test(path),
  );
  if (forbidden.length > 0) fail(`the tarball holds files that are not the product:\n  ${forbidden.join('\n  ')}`);
  const byTop = {};
  for (const path of files) {
    const top = path.startsWith('dist/') && path.split('/').length > 2 ? path.split('/').slice(0, 2).join('/') : path.split('/')[0];
    byTop[top] = (byTop[top] ?? 0) + 1;
  }
  say(`${packed[0].filename}: ${files.length} files, ${packed[0].size} bytes packed; no test/bench/chaos file`);
  say(
    `  ${Object.entries(byTop)
      .map(([top, count]) => `${top} ${count}`)
      .join(', ')}`,
  );
  for (const needed of [
    'dist/index.js',
    'dist/index.d.ts',
    'dist/entries/engine.js',
    'dist/entries/hono.js',
    'dist/entries/service.js',
    'dist/cli/main.js',
    'lua/decide.lua',
    'bin/quotafed.js',
    'regions/us-east.yaml',
  ]) {
    if (!files.includes(needed)) fail(`the tarball lacks ${needed}`);
  }

  // 2. Install into an empty project. Offline first (the npm cache CI filled with `npm ci`), the registry if not.
  const app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: 'pack-check-app', private: true, type: 'module' }, null, 2)}\n`);
  const install = ['install', tarball, 'ioredis', '--no-audit', '--no-fund', '--ignore-scripts'];
  try {
    execFileSync('npm', [...install, '--offline'], { cwd: app, stdio: 'pipe' });
  } catch (error) {
    const reason =
      String(error.stderr ?? '')
        .split('\n')
        .find((line) => /ERR/.test(line)) ?? `exit ${error.status}`;
    say(`offline install incomplete (${reason.trim()}): installing from the registry`);
    run('npm', install, { cwd: app });
  }
  const installed = join(app, 'node_modules', 'quotafed');
  if (lstatSync(installed).isSymbolicLink()) fail('node_modules/quotafed is a link, not the installed tarball');
  if (existsSync(join(installed, 'src'))) fail('the installed package holds src/');
  for (const toolchain of ['tsx', 'typescript']) {
    if (existsSync(join(app, 'node_modules', toolchain)))
      fail(`installing the package pulled in ${toolchain}: it must not be a runtime dependency`);
  }
  say(
    `installed into ${app} ` +
      `(${run('npm', ['ls', '--depth=0', '--parseable'], { cwd: app }).trim().split('\n').length - 1} top-level packages)`,
  );

  // 3a. The README's library snippet, verbatim, against a real redis-server on a free port.
  const redisPort = await freePort();
  const redis = start('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    cwd: work,
  });
  for (let tries = 0; ; tries++) {
    try {
      if (execFileSync('redis-cli', ['-p', String(redisPort), 'ping'], { encoding: 'utf8', stdio: 'pipe' }).trim() === 'PONG') break;
    } catch {
      // not listening yet
    }
    if (tries > 100 || redis.child.exitCode !== null) fail(`redis-server did not start on ${redisPort}:\n${redis.output()}`);
    await sleep(100);
  }
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const snippet = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]).find((code) => code.includes('createLimiter'));
  if (!snippet) fail('README.md has no ```ts block with createLimiter');
  if (!snippet.includes('new Redis()')) fail('the README snippet no longer says `new Redis()`: update pack-check.mjs');
  const program = `${snippet.replace('new Redis()', `new Redis(${redisPort}, '127.0.0.1')`)}
// Importing the library registers no Prometheus process metrics (the service does, when it starts).
const { registry } = await import('quotafed');
const processMetrics = (await registry.getMetricsAsJSON()).filter((metric) => /^quotafed_(process|nodejs)_/.test(metric.name)).length;
console.log(JSON.stringify({ allowed, remaining, retryAfterMs, processMetrics }));
process.exit(allowed === true && remaining === 999 && processMetrics === 0 ? 0 : 1);
`;
  writeFileSync(join(app, 'snippet.mjs'), program);
  const snippetOut = run(process.execPath, ['snippet.mjs'], { cwd: app, timeout: 30_000 }).trim();
  say(`README snippet: ${snippetOut}`);

  // 3b. The declarations resolve for a TypeScript user (NodeNext, the checkout's compiler, types from the package).
  writeFileSync(
    join(app, 'types.ts'),
    `import { Redis } from 'ioredis';
import { createLimiter, tokenBucket, type LimitResult } from 'quotafed';
const limiter = createLimiter({ redis: new Redis(), limit: tokenBucket(1000, '1m') });
const result: LimitResult = await limiter.limit('api-key-42');
const allowed: boolean = result.allowed;
// @ts-expect-error: a period the type does not accept
tokenBucket(10, 'a fortnight');
export { allowed };
`,
  );
  // The README's middleware snippet, verbatim: the subpath entries' declarations resolve too.
  const honoSnippet = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)]
    .map((match) => match[1])
    .find((code) => code.includes("'quotafed/hono'"));
  if (!honoSnippet) fail("README.md has no ```ts block importing 'quotafed/hono'");
  writeFileSync(join(app, 'hono-snippet.ts'), `${honoSnippet}export { app };\n`);
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        typeRoots: [join(ROOT, 'node_modules/@types')],
        types: ['node'],
      },
      files: ['types.ts', 'hono-snippet.ts'],
    }),
  );
  run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: app });
  say("types: a TypeScript file importing 'quotafed' and the README's 'quotafed/hono' snippet type-check against the shipped declarations");

  // 3c. What each entry loads, seen from a child node: a loader hook appends every module URL it resolves (ESM
  // imports, including the CommonJS packages they reach) to a file, and the child adds the CommonJS cache's paths
  // (packages that require() each other); the parent reads the union once the child has exited.
  writeFileSync(
    join(app, 'loaded-hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.PACK_CHECK_LOADED, result.url + '\\n');
  return result;
}
`,
  );
  writeFileSync(
    join(app, 'loaded-probe.mjs'),
    `import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
register('./loaded-hooks.mjs', import.meta.url);
const entry = process.argv[2];
const exports = Object.keys(await import(entry));
const cached = Object.keys(createRequire(import.meta.url).cache);
appendFileSync(process.env.PACK_CHECK_LOADED, cached.map((path) => 'file://' + path + '\\n').join(''));
console.log(JSON.stringify(exports));
process.exit(0);
`,
  );
  const HEAVY = {
    '@grpc/grpc-js': /\/node_modules\/@grpc\/grpc-js\//,
    bullmq: /\/node_modules\/bullmq\//,
    '@hono/node-server': /\/node_modules\/@hono\/node-server\//,
    // Tracing is off without an OTLP endpoint: no entry loads the SDK at import (src/engine/tracing.ts imports it on
    // demand). @opentelemetry/api alone is not the SDK: prom-client's process CPU metric requires it when installed.
    '@opentelemetry': /\/node_modules\/@opentelemetry\/(?!api\/)/,
  };
  const probe = (entry) => {
    const file = join(work, `loaded-${entry.replace(/\W+/g, '-')}.txt`);
    writeFileSync(file, '');
    const exports = JSON.parse(
      run(process.execPath, ['loaded-probe.mjs', entry], { cwd: app, timeout: 30_000, env: { ...process.env, PACK_CHECK_LOADED: file } }),
    );
    const urls = readFileSync(file, 'utf8').split('\n').filter(Boolean);
    const heavy = Object.keys(HEAVY).filter((name) => urls.some((url) => HEAVY[name].test(url)));
    const packages = new Set(urls.map((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1]).filter(Boolean));
    return { exports, heavy, packages: [...packages].sort() };
  };
  const expected = {
    quotafed: { exports: ['createLimiter', 'tokenBucket', 'registry'], heavy: [] },
    'quotafed/engine': { exports: ['createRedisEngine', 'createResilientEngine', 'loadConfigFile'], heavy: [] },
    'quotafed/hono': { exports: ['quotafed'], heavy: ['@hono/node-server'] },
    'quotafed/service': { exports: ['createRegionEngine', 'startRegionService'], heavy: ['@grpc/grpc-js', 'bullmq', '@hono/node-server'] },
  };
  for (const [entry, want] of Object.entries(expected)) {
    const got = probe(entry);
    const missing = want.exports.filter((name) => !got.exports.includes(name));
    if (missing.length > 0) fail(`'${entry}' does not export ${missing.join(', ')} (it exports ${got.exports.join(', ')})`);
    if (got.heavy.join() !== want.heavy.join())
      fail(`importing '${entry}' loads [${got.heavy.join(', ')}] of ${Object.keys(HEAVY).join(', ')}; expected [${want.heavy.join(', ')}]`);
    say(`import '${entry}': ${got.exports.length} exports; loads ${got.packages.join(', ')}`);
  }

  // 4. The CLI from the installed bin: check-config on the shipped region file, then serve until /readyz.
  const checked = run('npx', ['--no-install', 'quotafed', 'check-config', '--config', 'node_modules/quotafed/regions/us-east.yaml'], {
    cwd: app,
  }).trim();
  say(`npx quotafed check-config: ${checked}`);
  const port = await freePort();
  writeFileSync(
    join(app, 'region.yaml'),
    `region: pack-check
port: ${port}
redis:
  url: redis://127.0.0.1:${redisPort}
rules:
  - name: per-key
    match: { identity: apiKey }
    by: [apiKey]
    algorithm: tokenBucket
    limit: 1000
    period: 1m
`,
  );
  const serve = start('npx', ['--no-install', 'quotafed', 'serve', '--config', 'region.yaml'], {
    cwd: app,
    env: { ...process.env, QUOTAFED_LOG_LEVEL: 'warn' },
    detached: true,
  });
  const deadline = Date.now() + 30_000;
  let ready;
  while (Date.now() < deadline && serve.child.exitCode === null) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (response.ok) {
        ready = await response.text();
        break;
      }
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  if (!ready) fail(`npx quotafed serve did not answer /readyz within 30 s:\n${serve.output()}`);
  say(`npx quotafed serve: /readyz ${ready}`);
  const check = await fetch(`http://127.0.0.1:${port}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiKey: 'pack-check', method: 'GET', path: '/hello' }),
  });
  say(`POST /v1/check: ${check.status} ${(await check.text()).slice(0, 120)}`);
  if (check.status !== 200) fail('/v1/check did not allow the first request');
  say(`OK in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

function cleanup() {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    try {
      // serve runs under npx in its own process group: signal the whole group.
      process.kill(child.spawnargs[0] === 'npx' ? -child.pid : child.pid, 'SIGTERM');
    } catch {
      child.kill('SIGTERM');
    }
  }
  if (!KEEP) setTimeout(() => rmSync(work, { recursive: true, force: true }), 500).unref();
  else say(`kept ${work}`);
}

try {
  await main();
} catch (error) {
  if (process.exitCode !== 1) {
    process.stderr.write(`pack-check: FAILED: ${error.stack ?? error}\n`);
    process.exitCode = 1;
  }
} finally {
  cleanup();
}

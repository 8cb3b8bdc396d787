// The import boundaries of src/ (run by `npm run lint` and CI: `npx depcruise src`).
//
// Layers, bottom up; a module may import its own layer and the ones below, never one above:
//   base        config/, keys, log, paths, deadline, algorithms, metrics
//   protocol/   the pure federation spec (no I/O): imports only config types and itself
//   store/      the region's Redis: client, Lua loading, the Functions library, typed script calls
//   engine/     decisions: rules, the Redis engine, fail modes, caches
//   federation/ gossip between regions, recovery, admin views of federation state
//   http/, grpc/, dashboard/, service, cli/, ops/   the ways in
/** @type {import('dependency-cruiser').IConfiguration} */
const above = (...layers) => `^src/(${layers.join('|')})`;
const WAYS_IN = ['entries/', 'http/', 'grpc/', 'dashboard/', 'cli/', 'ops/', 'demo/', 'service\\.ts', 'policy-reload\\.ts', 'index\\.ts'];

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import circle makes two modules one: move the shared part down.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'protocol-is-pure',
      severity: 'error',
      comment: 'src/protocol is the spec the Lua mirrors: no I/O, no package, only config types and itself.',
      from: { path: '^src/protocol/' },
      to: { pathNot: ['^src/protocol/', '^src/config/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'store-below-engine',
      severity: 'error',
      comment: 'src/store serves engine and federation; it never imports them or anything above.',
      from: { path: '^src/store/' },
      to: { path: above('engine/', 'federation/', ...WAYS_IN) },
    },
    {
      name: 'engine-below-federation',
      severity: 'error',
      comment: 'The engine decides against one Redis; federation builds on it, never the other way.',
      from: { path: '^src/engine/' },
      to: { path: above('federation/', ...WAYS_IN) },
    },
    {
      name: 'federation-below-ways-in',
      severity: 'error',
      comment: 'Federation knows nothing of HTTP, gRPC, the dashboard or the CLI.',
      from: { path: '^src/federation/' },
      to: { path: above(...WAYS_IN) },
    },
    {
      name: 'base-below-everything',
      severity: 'error',
      comment: 'config, keys, log, paths, deadline and metrics are the floor.',
      from: { path: '^src/(config/|keys\\.ts|log\\.ts|paths\\.ts|deadline\\.ts|metrics\\.ts)' },
      to: { path: above('protocol/', 'store/', 'engine/', 'federation/', ...WAYS_IN) },
    },
    {
      name: 'src-is-production',
      severity: 'error',
      comment: 'Production code never imports tests, benches, the chaos lab or tools.',
      from: { path: '^src/' },
      to: { path: '^(test|bench|chaos|tools)/' },
    },
    {
      name: 'opentelemetry-on-demand',
      severity: 'error',
      comment:
        'Tracing is off by default and free when off: only src/engine/otel-tracer.ts imports @opentelemetry, and only ' +
        'src/engine/tracing.ts imports it (dynamically, once an OTLP endpoint is configured).',
      from: { path: '^src/', pathNot: '^src/engine/otel-tracer\\.ts$' },
      to: { path: 'node_modules/@opentelemetry/' },
    },
    {
      name: 'otel-tracer-loaded-dynamically',
      severity: 'error',
      comment: 'src/engine/otel-tracer.ts is imported only by src/engine/tracing.ts, with import().',
      from: { path: '^src/', pathNot: '^src/engine/tracing\\.ts$' },
      to: { path: '^src/engine/otel-tracer\\.ts$' },
    },
    {
      name: 'tracer-import-is-dynamic',
      severity: 'error',
      comment: 'A static import of the OpenTelemetry tracer would load the SDK with tracing off.',
      from: { path: '^src/engine/tracing\\.ts$' },
      to: { path: '^src/engine/otel-tracer\\.ts$', dependencyTypesNot: ['dynamic-import', 'type-only'] },
    },
    {
      name: 'library-entry-stays-light',
      severity: 'error',
      comment:
        "import 'quotafed' and 'quotafed/engine' give the library: they must not load gRPC, BullMQ, the HTTP server or OpenTelemetry.",
      from: { path: '^src/(index|entries/engine)\\.ts$' },
      to: { path: 'node_modules/(@grpc/|bullmq/|@hono/node-server/|@opentelemetry/)', reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};

// Region configuration: the zod schema of a region's YAML file (schema.ts), loading it with environment overrides
// and errors that name the field (load.ts), and the import of envoyproxy/ratelimit YAML into rules
// (envoy-import.ts).
export { ConfigError, applyEnvOverrides, loadConfigFile, parseConfig } from './load.ts';
export { expandEnvoyImports } from './envoy-import.ts';
export type { Config, Rule } from './schema.ts';

// The root logger. Every module takes a child of it (`logger.child({ module: 'breaker' })`), so one process
// writes one NDJSON stream with a consistent shape.
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/** Header values that carry credentials; pino replaces them wherever a request or headers object is logged. */
export const REDACTED_PATHS: readonly string[] = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'request.apiKey',
  'apiKey',
];

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** Where the NDJSON goes; stdout when omitted. Tests pass a stream to read the log. */
  destination?: DestinationStream;
  /** Fields on every line, e.g. `{ region: 'us-east' }`. */
  base?: Record<string, unknown>;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { pid: process.pid, ...options.base },
      redact: { paths: [...REDACTED_PATHS], censor: '[Redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination,
  );
}

/** A logger that writes nothing: the default for embedded use and unit tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

import { pino, type DestinationStream, type Logger } from 'pino';

/** Paths never written to a log: service keys and tokens. */
export const redactedPaths = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'token',
  '*.token',
  'body.token',
  'apiKeys',
  '*.apiKeys',
];

/** The process's root logger (JSON lines); pass it down, never import a global. */
export function createLogger(options: { level: string; name: string; destination?: DestinationStream }): Logger {
  return pino(
    {
      name: options.name,
      level: options.level,
      redact: { paths: redactedPaths, censor: '[redacted]' },
      base: { pid: process.pid },
    },
    options.destination,
  );
}

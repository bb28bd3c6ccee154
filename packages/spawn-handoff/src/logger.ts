/** What the hand-off logs with: a pino (or Fastify) logger; the saga logs on a child carrying the session. */
export interface SpawnLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
  child(bindings: Record<string, unknown>): SpawnLogger;
}

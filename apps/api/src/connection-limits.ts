import { readFileSync } from 'node:fs';

/**
 * Descriptors the API keeps for itself, out of its open-file limit, whatever its clients do: its Redis
 * connections (about ten), up to 50 webhook deliveries at once, up to 32 refused connections being
 * answered 503, name lookups, files and the logs.
 */
export const RESERVED_DESCRIPTORS = 128;

/** The largest default bound on connections, whatever the open-file limit. */
export const MAX_DEFAULT_CONNECTIONS = 10_000;

/** The fewest connections the API will run with: fewer is a limit set by mistake. */
export const MIN_CONNECTIONS = 16;

/**
 * The process's soft open-file limit (`ulimit -n`), from `/proc/self/limits`; undefined where that
 * cannot be read (not Linux) or the limit is unlimited.
 */
export function openFileLimit(
  read: () => string = () => readFileSync('/proc/self/limits', 'utf8'),
): number | undefined {
  let text: string;
  try {
    text = read();
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\d+)\s/m.exec(text)?.[1];
  return soft === undefined ? undefined : Number(soft);
}

/**
 * The bound on concurrent client connections: `MAX_CONNECTIONS` when set, else the open-file limit less
 * {@link RESERVED_DESCRIPTORS}, at most {@link MAX_DEFAULT_CONNECTIONS}. Either way it stays below the
 * open-file limit by the reserve, so no number of clients can take the descriptors the process needs for
 * Redis, webhooks and its own files (a connection over the bound is accepted and closed at once). Returns
 * a sentence naming the fix instead when the two cannot agree.
 */
export function connectionBound(
  explicit: number | undefined,
  fileLimit: number | undefined,
): { bound: number } | { problem: string } {
  const room = fileLimit === undefined ? undefined : fileLimit - RESERVED_DESCRIPTORS;
  if (explicit !== undefined) {
    if (room !== undefined && explicit > room)
      return {
        problem:
          `MAX_CONNECTIONS (${explicit}) must be at most the open-file limit (${fileLimit}) less the ` +
          `${RESERVED_DESCRIPTORS} descriptors the API keeps for itself (${room}): raise the limit (ulimit -n) or lower MAX_CONNECTIONS`,
      };
    return { bound: explicit };
  }
  if (room === undefined) return { bound: MAX_DEFAULT_CONNECTIONS };
  if (room < MIN_CONNECTIONS)
    return {
      problem:
        `the open-file limit (${fileLimit}) leaves fewer than ${MIN_CONNECTIONS} connections after the ` +
        `${RESERVED_DESCRIPTORS} descriptors the API keeps for itself: raise it (ulimit -n)`,
    };
  return { bound: Math.min(room, MAX_DEFAULT_CONNECTIONS) };
}

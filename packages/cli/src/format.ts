import { ApiError, NoCapacityError, SessionExistsError, ThrottledError } from '@cq/client';

/** One line describing an error answer, e.g. `throttled: retry in 7 s`. */
export function describeError(err: unknown): string {
  if (err instanceof ThrottledError) return `throttled: retry in ${Math.max(1, Math.ceil(err.retryAfterMs / 1000))} s`;
  if (err instanceof NoCapacityError)
    return `no_capacity: no worker slot is free; the token stays valid, retry in ${Math.max(1, Math.ceil(err.retryAfterMs / 1000))} s`;
  if (err instanceof SessionExistsError) return `session_exists: the user already has session ${err.sessionId}`;
  if (err instanceof ApiError) return `${err.code}: ${err.message}`;
  return `error: ${err instanceof Error ? err.message : String(err)}`;
}

/** Milliseconds as a short duration: `850 ms`, `12.5 s`, `3 min 5 s`. */
export function duration(ms: number): string {
  if (ms < 0) return '0 s';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Aligns rows of cells into columns. */
export function table(rows: ReadonlyArray<ReadonlyArray<string>>): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows
    .map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '))
    .join('\n');
}

import { ApiError, ForbiddenError, NoCapacityError, SessionExistsError, ThrottledError } from '@cq/client';
import type { Host, SessionEventType } from '@cq/contract';
import type { Target } from './context.js';
import { escaped, oneLine } from './escape.js';

/** Where the development key of a local API is (`scripts/up.mjs` writes it unless `API_KEYS` is set). */
const LOCAL_KEY_FILE = '.data/dev-api-key';

/**
 * What to change on the CLI's side when the API could not be reached or refused the key, in place of
 * the API's own message (which speaks HTTP: "Send a service key as Authorization: Bearer <key>.");
 * undefined for any other error.
 */
export function remedyOf(err: unknown, target: Target): string | undefined {
  if (!(err instanceof ApiError)) return undefined;
  const setKey =
    `set CQ_API_KEY or pass --key (an API started by ./scripts/up.sh keeps its key in ${LOCAL_KEY_FILE}: ` +
    `export CQ_API_KEY=$(cat ${LOCAL_KEY_FILE}))`;
  if (err.code === 'unauthorized')
    return target.keyFrom === undefined
      ? `no service key given: ${setKey}`
      : `the API at ${target.baseUrl} refused the service key from ${target.keyFrom}: ${setKey}`;
  if (err instanceof ForbiddenError)
    return (
      `the key from ${target.keyFrom ?? '--key'} lacks the scope "${err.scope}" this command needs: ` +
      `use a key that has it, or "admin" (cq whoami shows this key's name and scopes)`
    );
  if (err.code === 'unreachable')
    return (
      `the API at ${target.baseUrl} is unreachable: is ./scripts/up.sh running? ` +
      `If the API is elsewhere, pass --url or set CQ_API_URL`
    );
  return undefined;
}

/**
 * One line describing an error answer, e.g. `throttled: retry in 7 s`; with `target`, an unreachable
 * API or a refused key is described with the CLI's fix ({@link remedyOf}). What the API said (its code,
 * its message) is escaped ({@link escaped}): it cannot drive the terminal or start a line of its own.
 */
export function describeError(err: unknown, target?: Target): string {
  const remedy = target === undefined ? undefined : remedyOf(err, target);
  if (remedy !== undefined && err instanceof ApiError) return escaped`${err.code}: ${remedy}`;
  if (err instanceof ThrottledError) return `throttled: retry in ${Math.max(1, Math.ceil(err.retryAfterMs / 1000))} s`;
  if (err instanceof NoCapacityError) {
    const retry = `the token stays valid, retry in ${Math.max(1, Math.ceil(err.retryAfterMs / 1000))} s`;
    const pool = err.pool ?? '';
    // A pool no live host serves is not a full one: most often a mistyped name, which waiting does not mend.
    return err.reason === 'pool_unserved'
      ? escaped`no_capacity: no live worker host takes sessions of pool ${pool} (a mistyped pool? cq pools lists the pools hosts serve); ` +
          retry
      : escaped`no_capacity: no worker slot of pool ${pool || 'the token names'} is free; ` + retry;
  }
  if (err instanceof SessionExistsError) return escaped`session_exists: the user already has session ${err.sessionId}`;
  if (err instanceof ApiError) return escaped`${err.code}: ${err.message}`;
  return escaped`error: ${err instanceof Error ? err.message : String(err)}`;
}

/**
 * A live session's state in the words every command prints: the contract's state (`pending`, `running`,
 * `stopping`), and `running (ready)` once a running session has announced on SESSION_NOTIFY_FD that it is
 * ready. Readiness is a separate field of the session (`ready`), not a state; the API's event stream names
 * that moment with an event type of its own, `ready`, which {@link eventWords} prints with these words.
 */
export function stateWords(state: 'pending' | 'running' | 'stopping', ready: boolean): string {
  return state === 'running' && ready ? 'running (ready)' : state;
}

/** A session event's type in the words of {@link stateWords}: `ready` is `running (ready)`, the rest as they are. */
export function eventWords(type: SessionEventType): string {
  return type === 'ready' ? stateWords('running', true) : type;
}

/**
 * How a line about a live session opens, the same in `status`, `extend` and `watch`:
 * `ann: running (ready), fence 3, session s-1, on host-1, at 10.0.0.7:8080`; each field escaped (the
 * endpoint is whatever the session announced).
 */
export function sessionOpening(s: {
  userId: string;
  words: string;
  fence: number;
  sessionId: string;
  workerId?: string | undefined;
  endpoint?: string | undefined;
}): string[] {
  const parts = [escaped`${s.userId}: ${s.words}`, escaped`fence ${s.fence}`, escaped`session ${s.sessionId}`];
  if (s.workerId) parts.push(escaped`on ${s.workerId}`);
  if (s.endpoint) parts.push(escaped`at ${s.endpoint}`);
  return parts;
}

/**
 * How a session ended, the same in `watch`, `session` and `events`: its state, why where known, and its
 * exit code, e.g. `failed (out_of_memory) (exit code 137)`; each field escaped.
 */
export function endingWords(e: { state: string; reason?: string | undefined; exitCode?: number | undefined }): string {
  const why = e.reason === undefined ? '' : escaped` (${e.reason})`;
  const code = e.exitCode === undefined ? '' : escaped` (exit code ${e.exitCode})`;
  return escaped`${e.state}` + why + code;
}

/**
 * Milliseconds as a short duration: `850 ms`, `12.5 s`, `3 min 5 s`, `2 h 5 min`. The value is rounded
 * to the unit shown before the format is chosen, so a carry moves up a unit (299,600 ms is `5 min 0 s`,
 * never `4 min 60 s`; 59,999 ms is `1 min 0 s`, not `60.0 s`); negative is `0 s`, not a number `-`.
 */
export function duration(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  if (ms < 0) return '0 s';
  if (Math.round(ms) < 1000) return `${Math.round(ms)} ms`;
  const tenths = Math.round(ms / 100);
  if (tenths < 600) return `${(tenths / 10).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  const minutes = Math.round(ms / 60_000);
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/**
 * A host's isolation in words, the same in `hosts` and the dashboard: `network none · files private ·
 * 0.5 CPU` (`no CPU cap` without one), then what it leaves open, `(not isolated: network, files)`,
 * where the network is the host's or the files are shared. `-` from an API that does not say.
 */
export function isolationWords(isolation: Host['isolation'] | undefined): string {
  if (isolation === undefined) return '-';
  const { network, filesystem, cpus } = isolation;
  const cap = cpus === null ? 'no CPU cap' : `${cpus} ${cpus > 1 ? 'CPUs' : 'CPU'}`;
  const open = [network === 'host' ? 'network' : '', filesystem === 'shared' ? 'files' : ''].filter(Boolean);
  const words = `network ${network} · files ${filesystem} · ${cap}`;
  return open.length === 0 ? words : `${words} (not isolated: ${open.join(', ')})`;
}

/** Aligns rows of cells into columns, each cell escaped by {@link oneLine} (a cell cannot add a row). */
export function table(rows: ReadonlyArray<ReadonlyArray<string>>): string {
  const cells = rows.map((row) => row.map(oneLine));
  const widths: number[] = [];
  for (const row of cells) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return cells
    .map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '))
    .join('\n');
}

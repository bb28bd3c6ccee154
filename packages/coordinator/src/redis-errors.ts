import type { Cluster, Redis } from 'ioredis';
import { CoordinatorError, UnavailableError } from './errors.js';
import { TimeoutError } from './timeout.js';

/** A standalone ioredis client or a Redis Cluster client. */
export type RedisClient = Redis | Cluster;

/**
 * ioredis's error classes that mean the connection failed, by `name` (ioredis does not export them all,
 * and BullMQ may load its own copy): `AbortError` ("Command aborted due to connection close", "Cluster is
 * ended."), its subclasses `MaxRetriesPerRequestError` and `InterruptError`, and `ClusterAllFailedError`
 * ("Failed to refresh slots cache.").
 */
export const OUTAGE_ERROR_NAMES: ReadonlySet<string> = new Set([
  'AbortError',
  'MaxRetriesPerRequestError',
  'InterruptError',
  'ClusterAllFailedError',
  TimeoutError.name,
]);

/** Node's network error codes (`err.code`) that mean Redis could not be reached or went away. */
export const OUTAGE_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ERR_SOCKET_CLOSED',
  'ERR_STREAM_DESTROYED',
]);

/**
 * The messages of ioredis's plain `Error`s that mean no connection can carry the command (it has no
 * classes for them): closed, not writable without an offline queue, ioredis's own `commandTimeout`,
 * and a Cluster with no reachable node or too many redirections (a failover under way).
 */
const OUTAGE_MESSAGES: readonly RegExp[] = [
  /^Connection is closed\.$/,
  /^Stream isn't writeable and enableOfflineQueue options is false$/,
  /^Command timed out$/,
  /^Cluster isn't ready and enableOfflineQueue options is false$/,
  /^None of startup nodes is available$/,
  /^Cluster is disconnect(ed|ing)\.$/,
  /^Node is disconnected$/,
  /^Too many Cluster redirections\./,
  /^Socket timeout\./,
];

/**
 * The error replies (`ReplyError`, by their first word) of a Redis that is busy, loading, failing over
 * or refusing writes for a while: retry later, nothing is wrong with the command.
 */
const OUTAGE_REPLIES = /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|BUSY|NOREPLICAS|MISCONF|OOM|UNBLOCKED)\b/;

function isOutage(err: Error & { code?: unknown }): boolean {
  if (err.name === 'ReplyError') return OUTAGE_REPLIES.test(err.message);
  if (OUTAGE_ERROR_NAMES.has(err.name)) return true;
  if (typeof err.code === 'string' && OUTAGE_ERROR_CODES.has(err.code)) return true;
  return OUTAGE_MESSAGES.some((pattern) => pattern.test(err.message));
}

/**
 * True for the errors, from a known list, that say Redis is unreachable, busy or failing over: ioredis's
 * connection errors ({@link OUTAGE_ERROR_NAMES} and its plain connection messages), Node's network
 * codes ({@link OUTAGE_ERROR_CODES}), our own {@link TimeoutError} and {@link UnavailableError}, and
 * the replies of a Redis that cannot serve now (`CLUSTERDOWN`, `TRYAGAIN`, `LOADING`, `MASTERDOWN`, ...).
 * Looks through `cause`. Anything else (a `TypeError`, an `ERR` reply) is a bug, not an outage.
 */
export function isUnavailable(err: unknown): boolean {
  for (let at = err, depth = 0; at instanceof Error && depth < 8; at = at.cause, depth++) {
    // Our own errors say what they are: only `unavailable` is an outage, whatever caused it.
    if (at instanceof CoordinatorError) return at.code === 'unavailable';
    if (isOutage(at)) return true;
  }
  return false;
}

/** Wraps a Redis failure: outages become {@link UnavailableError}; anything else is passed on. */
export function wrapRedisError(err: unknown): Error {
  if (err instanceof UnavailableError) return err;
  if (isUnavailable(err)) return new UnavailableError(err);
  return err instanceof Error ? err : new Error(String(err));
}

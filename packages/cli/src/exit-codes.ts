import { ApiError } from '@cq/client';
import type { ApiErrorCode } from '@cq/contract';

/** Exit codes scripts can rely on. */
export const exitCodes = {
  ok: 0,
  /** Internal error of the CLI itself. */
  failure: 1,
  /** The command line is wrong (unknown command or option, missing argument). */
  usage: 2,
  /** 401: the service key is missing or wrong. */
  unauthorized: 3,
  /** 403 token_invalid. */
  tokenInvalid: 4,
  /** 404 no_session (status, extend, stop, labels, activity, session, logs). */
  noSession: 5,
  /** 409 session_exists. */
  sessionExists: 6,
  /** 429 throttled. */
  throttled: 7,
  /** 503, or the API could not be reached, or a stream it sent closed before its end. */
  unavailable: 8,
  /** Any other error answer (400, 413, 409 session_mismatch, ...). */
  rejected: 9,
  /** 404 no_host (drain). */
  noHost: 14,
  /** 404 no_webhook (webhooks delete, deliveries). */
  noWebhook: 15,
  /** 403 forbidden: the key lacks the scope the command needs. */
  forbidden: 16,
} as const;

/** The exit code of each API error code a script may want to tell apart; any other is `rejected`. */
const exitCodeOfApiError: Partial<Record<ApiErrorCode | 'unreachable' | 'stream_closed', number>> = {
  unauthorized: exitCodes.unauthorized,
  token_invalid: exitCodes.tokenInvalid,
  no_session: exitCodes.noSession,
  session_exists: exitCodes.sessionExists,
  throttled: exitCodes.throttled,
  unavailable: exitCodes.unavailable,
  // No worker slot free: like unavailable, retry shortly with the same token.
  no_capacity: exitCodes.unavailable,
  no_host: exitCodes.noHost,
  no_webhook: exitCodes.noWebhook,
  forbidden: exitCodes.forbidden,
  // The client's code when the API could not be reached at all.
  unreachable: exitCodes.unavailable,
  // The client's code when an event or output stream closed before its end (`watch`, `logs --follow`, `events`).
  stream_closed: exitCodes.unavailable,
};

/** The exit code for an error answer of the API. */
export function exitCodeOf(err: unknown): number {
  if (!(err instanceof ApiError)) return exitCodes.failure;
  return exitCodeOfApiError[err.code as ApiErrorCode] ?? exitCodes.rejected;
}

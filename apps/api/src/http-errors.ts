import type { FastifyReply } from 'fastify';
import { apiErrors, type ApiErrorCode } from '@cq/contract';
import type { ErrorCode } from '@cq/coordinator';

/** The API's error codes with their statuses and messages: one table, in the contract package. */
export const httpErrors = apiErrors;

/**
 * The status the API answers a coordinator error with. The codes not in {@link httpErrors} belong to
 * the worker side (a lease, a claim) and reach the API only through a bug.
 */
export const statusOfCoordinatorCode: Readonly<Record<ErrorCode, number>> = {
  token_invalid: 403,
  session_exists: 409,
  throttled: 429,
  no_session: 404,
  stale: 409,
  pending_timeout: 409,
  lease_lost: 409,
  deadline_reached: 409,
  lease_held: 409,
  invalid_argument: 400,
  no_capacity: 503,
  no_host: 404,
  lifetime_too_long: 400,
  session_stopping: 409,
  session_mismatch: 409,
  unavailable: 503,
  script_failed: 500,
};

/** A stable error code of the HTTP API. */
export type HttpErrorCode = ApiErrorCode;

/** An error to answer with `{"error": {"code", "message"}}` and the code's status. */
export class HttpError extends Error {
  override name = 'HttpError';
  readonly code: HttpErrorCode;
  readonly status: number;
  /** Extra fields for the body's `error` object (e.g. `sessionId`, `retryAfterMs`). */
  readonly details: Record<string, unknown>;

  constructor(
    code: HttpErrorCode,
    message?: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message ?? httpErrors[code].message, options);
    this.code = code;
    this.status = httpErrors[code].status;
    this.details = details;
  }
}

/** The body of every error answer. */
export function errorBody(
  code: HttpErrorCode,
  message: string,
  details: Record<string, unknown> = {},
): { error: { code: string; message: string } & Record<string, unknown> } {
  return { error: { code, message, ...details } };
}

/**
 * Answers with an error without throwing: the hot rejection paths (403, 409, 429) skip the cost of an
 * exception and the error handler.
 */
export function sendError<R extends FastifyReply>(
  reply: R,
  code: HttpErrorCode,
  message?: string,
  details: Record<string, unknown> = {},
): R {
  return reply.code(httpErrors[code].status).send(errorBody(code, message ?? httpErrors[code].message, details)) as R;
}

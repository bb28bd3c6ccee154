import type { FastifyReply } from 'fastify';
import { apiErrors, statusOfCoordinatorCode, type ApiErrorCode } from '@cq/contract';

/** The API's error codes with their statuses and messages: one table, in the contract package. */
export const httpErrors = apiErrors;
export { statusOfCoordinatorCode };

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

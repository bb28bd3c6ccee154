import type { ErrorCode } from '@cq/coordinator';
import { errorCodes as coordinatorCodes } from '@cq/coordinator';

/**
 * Every error code the HTTP API answers with, its status and default message. Codes are stable and
 * never reused; the coordinator's codes keep their meaning here.
 */
export const apiErrors = {
  invalid_request: { status: 400, message: 'The request is not valid.' },
  invalid_json: { status: 400, message: 'The body is not valid JSON.' },
  unauthorized: { status: 401, message: 'Send a service key as Authorization: Bearer <key>.' },
  not_found: { status: 404, message: 'There is no such route.' },
  payload_too_large: { status: 413, message: 'The body is larger than 64 KiB.' },
  unsupported_media_type: { status: 415, message: 'Send the body as application/json.' },
  token_invalid: { status: 403, message: coordinatorCodes.token_invalid.message },
  session_exists: { status: 409, message: coordinatorCodes.session_exists.message },
  throttled: { status: 429, message: coordinatorCodes.throttled.message },
  no_session: { status: 404, message: coordinatorCodes.no_session.message },
  no_host: { status: 404, message: coordinatorCodes.no_host.message },
  lifetime_too_long: { status: 400, message: coordinatorCodes.lifetime_too_long.message },
  session_stopping: { status: 409, message: coordinatorCodes.session_stopping.message },
  no_capacity: { status: 503, message: coordinatorCodes.no_capacity.message },
  unavailable: { status: 503, message: coordinatorCodes.unavailable.message },
  internal: { status: 500, message: 'Something went wrong on our side; it has been logged.' },
} as const;

/** A stable error code of the HTTP API. */
export type ApiErrorCode = keyof typeof apiErrors;

/**
 * The status the API answers a coordinator error with. The codes not in {@link apiErrors} belong to
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
  unavailable: 503,
  script_failed: 500,
};

/** The body of every error answer. */
export interface ErrorBody {
  error: { code: string; message: string } & Record<string, unknown>;
}

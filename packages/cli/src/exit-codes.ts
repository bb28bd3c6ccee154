import { ApiError } from '@cq/client';

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
  /** 404 no_session. */
  noSession: 5,
  /** 409 session_exists. */
  sessionExists: 6,
  /** 429 throttled. */
  throttled: 7,
  /** 503, or the API could not be reached. */
  unavailable: 8,
  /** Any other error answer (400, 413, ...). */
  rejected: 9,
} as const;

/** The exit code for an error answer of the API. */
export function exitCodeOf(err: unknown): number {
  if (!(err instanceof ApiError)) return exitCodes.failure;
  switch (err.code) {
    case 'unauthorized':
      return exitCodes.unauthorized;
    case 'token_invalid':
      return exitCodes.tokenInvalid;
    case 'no_session':
      return exitCodes.noSession;
    case 'session_exists':
      return exitCodes.sessionExists;
    case 'throttled':
      return exitCodes.throttled;
    case 'unavailable':
    case 'unreachable':
      return exitCodes.unavailable;
    default:
      return exitCodes.rejected;
  }
}
